import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { gaveWay } from "./changes.js";
import { MoveLeaseLostError, MoveTimeoutError, OwnershipOptionsError } from "./errors.js";
import { bounded, type Raw, raw, unbounded } from "./raw.js";
import {
  inProgress,
  isLive,
  type LeaseMap,
  MOVE_COLUMNS,
  type MoveRecord,
  type MoveRow,
  moveNames,
} from "./records.js";
import { type FencedTable, shardOfRowSql } from "./sql.js";

/** How long a move's lease lasts unless renewed, by default: a mover that dies holds its shard at most this long. */
export const DEFAULT_LEASE_MS = 10_000;

export interface LeaseOptions {
  /**
   * How long the lease lasts unless renewed (the mover renews it three times per period, and every
   * step renews it). A mover that dies, hangs or loses its connections holds the shard at most this
   * long: then routers give a fenced shard back to its owner, and another move may take over.
   * Default 10 000 ms.
   */
  leaseMs?: number;
  /** Who holds the lease, as a second mover is told. Default: host, process id and a random part. */
  holder?: string;
}

/**
 * The lease of one move of one shard: whoever changes a shard's owner (`moveShard`, a balancer, a
 * person at a terminal) holds one. It is a row of the source database's `ShardMove`, taken by
 * compare-and-set, with a holder, an expiry by that database's clock and a fencing token. Every step
 * below checks it (and renews it) in the same transaction as the change it makes, so a mover that
 * lost its lease (it lapsed and another mover took the move over, or a router gave the fenced
 * shard back to its owner) can change nothing more. Steps at the target run inside a transaction
 * at the source that holds the lease's row locked until the target has committed.
 *
 * Destructive steps are guarded by facts the databases record, never by what the mover remembers:
 * the target's copy is discarded only while the source has not switched to it; the source's old
 * copy is cleaned up only under its tombstone of this move; the switch takes a copy that this
 * lease checked, and only from a source this move fenced.
 */
export class ShardLease<Client extends ShardClient = ShardClient> {
  /** The names of this attempt's publication (on the source) and subscription and slot (the target's, on the source). */
  readonly names: { publication: string; subscription: string };
  private timer: ReturnType<typeof setInterval> | undefined;
  private lost: MoveLeaseLostError | undefined;
  /** When this lease fenced the shard (its writes wait from then until the switch); undefined before. */
  private fencedAt: number | undefined;
  /** Whether this lease decided the switch (the freeze is over as far as the source is concerned). */
  private decidedSwitch = false;
  /** How long the shard may stay fenced by this lease without a switch (ms): the lease never runs past it. */
  private freezeBudgetMs: number;
  /** A renewal of the timer still running (the next tick is skipped rather than queued behind it). */
  private renewing = false;

  private constructor(
    private readonly map: LeaseMap<Client>,
    readonly shard: ShardIdentifier,
    /** The source: where the lease lives. */
    readonly from: Database<Client>,
    readonly to: Database<Client>,
    readonly attempt: string,
    private token: number,
    readonly holder: string,
    readonly leaseMs: number,
  ) {
    this.names = moveNames(shard, attempt);
    this.freezeBudgetMs = leaseMs;
  }

  /**
   * How long the shard may stay fenced by this lease without a switch (default: the lease). While it
   * is fenced, the lease is extended only up to the fence plus this budget, by renewals and steps
   * alike: a mover that is stuck (a database it waits for does not answer) or dies holds the shard's
   * writes for at most this long, then routers give the shard back. An offline move, whose copy runs
   * inside its fence, gives its copy's time.
   */
  set freezeBudget(ms: number) {
    this.freezeBudgetMs = ms;
  }

  get freezeBudget(): number {
    return this.freezeBudgetMs;
  }

  /**
   * Takes the lease of a new move of `shard` (owned by its database in the registry's placement,
   * which the caller has just refreshed) to `to`, by compare-and-set on the owner: only while the
   * owner simply owns the shard (not armed, fenced or moved) and no move of it is recorded there.
   * `MoveInProgressError` when another mover holds one; `EpochConflictError` when the owner no
   * longer owns the shard.
   */
  static async acquire<Client extends ShardClient>(
    map: LeaseMap<Client>,
    shard: ShardIdentifier,
    to: Database<Client>,
    options: LeaseOptions = {},
  ): Promise<ShardLease<Client>> {
    const { leaseMs, holder } = leaseSettings(options);
    const from = map.registry.databaseOf(shard);
    if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);
    const attempt = randomUUID().replaceAll("-", "");
    const target = map.identityOf(to);
    await map.changes.locked(from, async (tx) => {
      const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null }[]>(
        `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1 FOR UPDATE`,
        shard.bits,
      );
      if (own?.state !== "owned" || own.peer !== null) {
        throw map.conflict(
          shard,
          `${from.name} does not simply own it (${own ? `${own.state}${own.peer ? `, moving to ${own.peer}` : ""}` : "no record"}): no move can start from there`,
        );
      }
      const taken = await tx.$queryRawUnsafe<{ shard: number }[]>(
        `INSERT INTO "ShardMove" (shard, target, step, attempt, token, holder, "expiresAt", "startedAt", "updatedAt")
         VALUES ($1, $2, 'copying', $3, 1, $4, clock_timestamp() + $5::float8 * interval '1 millisecond', now(), now())
         ON CONFLICT (shard) DO NOTHING RETURNING shard`,
        shard.bits,
        target,
        attempt,
        holder,
        leaseMs,
      );
      if (taken.length === 0) {
        const [row] = await tx.$queryRawUnsafe<MoveRow[]>(
          `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
          shard.bits,
        );
        throw inProgress(map, { ...row!, shard, database: from });
      }
    });
    return new ShardLease(map, shard, from, to, attempt, 1, holder, leaseMs);
  }

  /**
   * Takes over a stopped move (its lease lapsed, or a router abandoned it) by compare-and-set on
   * its token: the old holder, should it wake up, is refused at its next step. The attempt, and so
   * the names of its replication objects, stay. `MoveInProgressError` when its lease is live again
   * or another mover took it over first.
   */
  static async takeOver<Client extends ShardClient>(
    map: LeaseMap<Client>,
    record: MoveRecord<Client>,
    options: LeaseOptions = {},
  ): Promise<ShardLease<Client>> {
    const { leaseMs, holder } = leaseSettings(options);
    const to = map.registry.databases.find((p) => {
      try {
        return map.identityOf(p) === record.target;
      } catch {
        return false;
      }
    });
    if (!to)
      throw new OwnershipOptionsError([
        `a stopped move of shard ${record.shard.key} on ${record.database.name} names ${record.target}, which is not a database of the registry (or has not answered)`,
      ]);
    // The old holder's transactions end within its lease (see `check`): waiting longer for its row is
    // never needed. A router that gave the shard back meanwhile grew the token: taken over from there.
    let current = record;
    for (let round = 0; round < 5; round++) {
      const taken = await casTakeOver(current, holder, leaseMs);
      if (taken !== undefined)
        return new ShardLease(map, record.shard, record.database, to, record.attempt, taken, holder, leaseMs);
      const [now] = await raw(record.database).$queryRawUnsafe<MoveRow[]>(
        `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
        record.shard.bits,
      );
      if (!now)
        throw map.conflict(
          record.shard,
          "its stopped move was finished or undone by another mover meanwhile",
        );
      current = { ...now, shard: record.shard, database: record.database };
      if (isLive(current) || current.attempt !== record.attempt) throw inProgress(map, current);
    }
    throw inProgress(map, current);
  }

  /**
   * Renews the lease every third of its period until `stop()`; a renewal that finds it taken marks
   * it lost. While the shard is fenced, a renewal extends the lease no further than the fence plus
   * the freeze budget (`extensionMs`); past that it only checks the lease is still held: a mover
   * stuck inside its fence lets the lease lapse, and routers give the shard back to its owner.
   */
  start(): void {
    if (this.timer) return;
    // Renewals outlive the deadline of the move's phase that starts them. A renewal that does not
    // answer (the source froze) is not repeated behind it: the lease lapses by the source's clock.
    this.timer = unbounded(() =>
      setInterval(
        () => {
          if (this.renewing) return;
          this.renewing = true;
          (this.extensionMs() > 0 ? this.renew() : this.stillHeld())
            .catch(() => {})
            .finally(() => {
              this.renewing = false;
            });
        },
        Math.max(100, Math.floor(this.leaseMs / 3)),
      ),
    );
    this.timer.unref?.();
  }

  /**
   * How far a renewal extends the lease from now (ms): its period, but while the shard is fenced by
   * this lease without a switch, no further than the fence plus the freeze budget (0 once past it).
   */
  private extensionMs(): number {
    if (this.fencedAt === undefined || this.decidedSwitch) return this.leaseMs;
    return Math.max(0, Math.min(this.leaseMs, this.freezeBudgetMs - this.frozenFor()));
  }

  /** How long the shard has been fenced by this lease without a switch (ms; 0 when not fenced, or switched). */
  frozenFor(): number {
    return this.fencedAt === undefined || this.decidedSwitch ? 0 : performance.now() - this.fencedAt;
  }

  /** Stops renewing: the lease lapses within its period unless released first. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Whether the lease is still this mover's, read without renewing it; marks it lost (and throws) when not. */
  async stillHeld(): Promise<void> {
    if (this.lost) throw this.lost;
    const [now] = await raw(this.from).$queryRawUnsafe<MoveRow[]>(
      `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
      this.shard.bits,
    );
    if (now && now.attempt === this.attempt && now.token === this.token) return;
    throw this.lose(now);
  }

  /** Marks the lease lost, as its record `now` says, stops renewing it, and returns the error. */
  private lose(now: MoveRow | undefined): MoveLeaseLostError {
    this.lost = new MoveLeaseLostError(
      this.shard,
      !now
        ? "the move's record is gone: another mover finished or undid it"
        : now.step === "abandoned"
          ? now.holder
          : `taken over by ${now.holder} (token ${now.token})`,
    );
    this.stop();
    return this.lost;
  }

  /**
   * Extends the lease by its period from now (the source's clock; see `extensionMs`).
   * `MoveLeaseLostError` when it is no longer this mover's. It waits at most a third of the lease
   * for the lease's row: a step holding it renews the lease itself.
   */
  async renew(): Promise<void> {
    await raw(this.from).$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${Math.floor(this.leaseMs / 3)}ms'`);
      await this.check(tx);
    });
  }

  /**
   * The guard every step runs in its transaction at the source: the lease must still be this
   * mover's (same attempt, same token); it is renewed, and its row stays locked until the step's
   * transaction ends. `step` records the move's progress in the same transaction.
   */
  async check(tx: Raw, step?: string): Promise<void> {
    if (this.lost) throw this.lost;
    // A mover frozen in the middle of a step (a stalled host) must not hold the lease's row locked
    // for longer than its lease: its session is ended by the server, and its locks go with it.
    await tx.$executeRawUnsafe(`SET LOCAL idle_in_transaction_session_timeout = '${this.leaseMs}ms'`);
    const rows = await tx.$queryRawUnsafe<{ step: string }[]>(
      `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() + $4::float8 * interval '1 millisecond',
         "updatedAt" = clock_timestamp()${step ? ", step = $5" : ""}
       WHERE shard = $1 AND attempt = $2 AND token = $3 RETURNING step`,
      this.shard.bits,
      this.attempt,
      this.token,
      this.extensionMs(),
      ...(step ? [step] : []),
    );
    if (rows.length > 0) return;
    const [now] = await tx.$queryRawUnsafe<MoveRow[]>(
      `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
      this.shard.bits,
    );
    throw this.lose(now);
  }

  /**
   * Takes this lease's move over again, by compare-and-set on its token, once nobody holds it: its
   * lease lapsed (this mover was too slow, or stuck) or a router gave its fenced shard back to its
   * owner (`givenBack`). The new lease may then undo the move. `MoveInProgressError` when another
   * mover holds it, `EpochConflictError` when it was finished or undone meanwhile.
   */
  async retake(): Promise<{ lease: ShardLease<Client>; givenBack: boolean }> {
    const [now] = await raw(this.from).$queryRawUnsafe<MoveRow[]>(
      `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
      this.shard.bits,
    );
    if (!now)
      throw this.map.conflict(this.shard, "its move was finished or undone by another mover meanwhile");
    const record = { ...now, shard: this.shard, database: this.from };
    if (now.attempt !== this.attempt || isLive(record)) throw inProgress(this.map, record);
    const lease = await ShardLease.takeOver(this.map, record, { leaseMs: this.leaseMs, holder: this.holder });
    return { lease, givenBack: now.step === "abandoned" };
  }

  /** Throws `MoveLeaseLostError` when a step or a renewal found the lease taken. */
  ensure(): void {
    if (this.lost) throw this.lost;
  }

  /** Whether the lease is known to be lost (a step or a renewal found it taken). */
  get isLost(): boolean {
    return this.lost !== undefined;
  }

  /** `fn` in a transaction at the source that checked the lease (and holds its row until it commits). */
  atSource<R>(fn: (tx: Raw) => Promise<R>): Promise<R> {
    return this.source(fn, { relist: false });
  }

  /** `fn` in a change of the source's records (its change lock), after the lease's check. */
  private source<R>(
    fn: (tx: Raw) => Promise<R>,
    options: { list?: number; relist?: boolean; step?: string } = {},
  ): Promise<R> {
    return this.map.changes.change(
      this.from,
      async (tx) => {
        await this.check(tx, options.step);
        return fn(tx);
      },
      options,
    );
  }

  /**
   * `fn` in a transaction at the target (a change of its records, under its change lock; or, with
   * `change: false`, a plain transaction), nested in one at the source that checked the lease and
   * holds its row locked until the target has committed: no other mover can take the move over in
   * between. `fn` gets the source's transaction too.
   *
   * The target's fence list is brought in line outside the source's transaction, which must not wait
   * idle (it is ended past the lease): `list` before it (listing is always safe; its DDL may wait for
   * the table's writers, or a vacuum), the rest after it has committed (a shard listed for nothing
   * only costs its writes a look at its record until the next change tidies it).
   */
  private async target<R>(
    fn: (tx: Raw, source: Raw) => Promise<R>,
    options: { list?: number; change?: boolean; relist?: boolean } = {},
  ): Promise<R> {
    const changing = options.change !== false;
    if (changing && options.list !== undefined) await this.map.changes.relist(this.to, [options.list]);
    const bounded = async (tx: Raw) => {
      await tx.$executeRawUnsafe(`SET LOCAL idle_in_transaction_session_timeout = '${this.leaseMs}ms'`);
      return fn(tx, source);
    };
    let source!: Raw;
    const result = await this.map.changes.locked(this.from, async (held) => {
      source = held;
      await this.check(source);
      if (!changing) return raw(this.to).$transaction(bounded, { timeout: 60_000, maxWait: 30_000 });
      return this.map.changes.change(this.to, bounded, {
        ...(options.list !== undefined ? { list: options.list } : {}),
        relist: false,
      });
    });
    if (changing && options.relist !== false) await this.map.changes.relist(this.to).catch(() => {});
    return result;
  }

  /**
   * Lists the shard in its owner's fence while the owner still owns it, naming where it will go: its
   * writes then read its record (and note the keys of the rows they write, which the move verifies
   * again inside its fence), and the fence that follows is one row update, with no DDL waiting for
   * every writer of the tables.
   */
  async arm(): Promise<void> {
    await this.source(async (tx) => {
      const armed = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET peer = $2, attempt = $3, "updatedAt" = now()
         WHERE shard = $1 AND state = 'owned' AND (peer IS NULL OR attempt = $3)`,
        this.shard.bits,
        this.map.identityOf(this.to),
        this.attempt,
      );
      if (armed !== 1) throw this.map.conflict(this.shard, `not simply owned by ${this.from.name}`);
      await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, this.shard.bits);
    });
  }

  /**
   * The target records the shard as incoming for this attempt (at the source's epoch) and fences it:
   * nothing but the mover's own sessions and replication write its rows there until the switch.
   */
  async receive(): Promise<void> {
    await this.target(
      async (tx, source) => {
        const [own] = await source.$queryRawUnsafe<{ epoch: number }[]>(
          `SELECT epoch FROM "ShardOwnership" WHERE shard = $1`,
          this.shard.bits,
        );
        const [row] = await tx.$queryRawUnsafe<{ shard: number }[]>(
          `INSERT INTO "ShardOwnership" (shard, epoch, state, peer, attempt, "verifiedBy") VALUES ($1, $2, 'incoming', $3, $4, NULL)
           ON CONFLICT (shard) DO UPDATE SET epoch = EXCLUDED.epoch, state = 'incoming', peer = EXCLUDED.peer,
             attempt = EXCLUDED.attempt, "verifiedBy" = NULL, "updatedAt" = now()
             WHERE "ShardOwnership".state IN ('moved', 'incoming') AND "ShardOwnership".epoch <= EXCLUDED.epoch
           RETURNING shard`,
          this.shard.bits,
          own?.epoch ?? 0,
          this.map.identityOf(this.from),
          this.attempt,
        );
        if (!row)
          throw this.map.conflict(
            this.shard,
            `${this.to.name} holds a record of it that is neither a tombstone nor an older incoming one`,
          );
      },
      { list: this.shard.bits },
    );
  }

  /**
   * The source stops taking the shard's writes: in one transaction, behind the writers already at
   * work on the shard (its advisory lock, taken exclusively), its record goes from owned to fenced by
   * this attempt, and every later write to its rows is refused. A shard not armed first is listed in
   * its tables' fence before (each table waits for its writers then). Returns the epoch.
   */
  async fence(): Promise<{ epoch: number; database: string }> {
    // The freeze is counted from here: the fence's own check extends the lease no further than the
    // freeze budget (`extensionMs`).
    this.fencedAt = performance.now();
    const epoch = await this.source(
      async (tx) => {
        await tx.$queryRawUnsafe(
          `SELECT pg_advisory_xact_lock(${LOCKS.shardWriters}, $1)::text AS locked`,
          this.shard.bits,
        );
        const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
          `UPDATE "ShardOwnership" SET state = 'fenced', peer = $2, attempt = $3, "updatedAt" = now()
           WHERE shard = $1 AND state = 'owned' AND (attempt IS NULL OR attempt = $3) RETURNING epoch`,
          this.shard.bits,
          this.map.identityOf(this.to),
          this.attempt,
        );
        if (!row)
          throw this.map.conflict(this.shard, `not owned by ${this.from.name} (fenced or moved already)`);
        return row.epoch;
      },
      // Nothing more while writes wait: the listing is tidied after the switch (`tidy`).
      { list: this.shard.bits, step: "fenced", relist: false },
    ).catch((error: unknown) => {
      this.fencedAt = undefined;
      throw error;
    });
    return { epoch, database: this.from.name };
  }

  /**
   * `fn` in a transaction at the target that passes its fence (`SET LOCAL shardkit.mover = 'on'`):
   * copying the shard's rows in, as this mover. Checked against the lease like every step.
   */
  copyIn<R>(fn: (tx: Raw) => Promise<R>): Promise<R> {
    return this.target(
      async (tx) => {
        await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
        return fn(tx);
      },
      { change: false },
    );
  }

  /**
   * Records at the target that this lease (its fencing token) checked the copy: a switch takes no
   * other. A lease that took a move over, or a fence a router gave back meanwhile, must check again.
   */
  async verified(): Promise<void> {
    await this.target(
      async (tx) => {
        const marked = await tx.$executeRawUnsafe(
          `UPDATE "ShardOwnership" SET "verifiedBy" = $3, "updatedAt" = now()
           WHERE shard = $1 AND state = 'incoming' AND attempt = $2`,
          this.shard.bits,
          this.attempt,
          this.token,
        );
        if (marked !== 1)
          throw this.map.conflict(this.shard, `${this.to.name} holds no incoming copy of this move attempt`);
      },
      { relist: false },
    );
  }

  /**
   * The change of owner, in two commits. First the decision, at the source, where the lease is: only
   * if the source is fenced by this attempt and the target holds this attempt's verified copy, the
   * source's record becomes a tombstone at the next epoch naming the target (and the move's record
   * says switched), in the same transaction as the lease's check: a router giving a lapsed fence
   * back changes the same record, so exactly one of the two succeeds. Then the target owns the shard
   * at that epoch (`completeSwitch`; a router refused there by the incoming record does it too, from
   * the tombstone). Returns the new epoch, and when (`performance.now()`) the target owned the shard.
   */
  async switch(): Promise<{ epoch: number; ownedAt: number }> {
    const { epoch } = await this.decide();
    await completeSwitch(this.map, this.to, this.shard, this.attempt, epoch);
    const ownedAt = performance.now(); // the target takes the shard's writes from here
    await this.map.refresh();
    return { epoch, ownedAt };
  }

  /**
   * The switch's first commit alone: the decision at the source (see `switch`). Until the target
   * owns the shard (`switch` does it next; a router refused by the target's incoming record does it
   * too), no database takes the shard's writes.
   */
  async decide(): Promise<{ epoch: number }> {
    const epoch = await this.source(
      async (tx) => {
        const [copy] = await raw(this.to).$queryRawUnsafe<
          { state: string; attempt: string | null; verifiedBy: number | null }[]
        >(`SELECT state, attempt, "verifiedBy" FROM "ShardOwnership" WHERE shard = $1`, this.shard.bits);
        if (
          !(copy?.state === "incoming" && copy.attempt === this.attempt && copy.verifiedBy === this.token)
        ) {
          const why = !copy
            ? "no record"
            : `${copy.state}${copy.attempt === this.attempt ? "" : " for another attempt"}${copy.verifiedBy === this.token ? "" : copy.verifiedBy === null ? ", not checked" : ", checked by an earlier holder"}`;
          throw this.map.conflict(
            this.shard,
            `${this.to.name}'s copy was not checked by this lease (${why}): no switch`,
          );
        }
        const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
          `UPDATE "ShardOwnership" SET state = 'moved', epoch = epoch + 1, peer = $2, "updatedAt" = now()
           WHERE shard = $1 AND state = 'fenced' AND attempt = $3 RETURNING epoch`,
          this.shard.bits,
          this.map.identityOf(this.to),
          this.attempt,
        );
        if (!row)
          throw this.map.conflict(this.shard, `not fenced by this move at ${this.from.name}: no switch`);
        return row.epoch;
      },
      { relist: false, step: "switched" },
    );
    this.decidedSwitch = true;
    return { epoch };
  }

  /**
   * A move of an earlier version that switched (the target owns the shard at `epoch`) but did not
   * record the source's tombstone: records it.
   */
  async entomb(epoch: number): Promise<void> {
    await this.source(async (tx) => {
      await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'moved', epoch = $2, peer = $3, attempt = $4, "updatedAt" = now()
         WHERE shard = $1 AND state = 'fenced' AND epoch < $2`,
        this.shard.bits,
        epoch,
        this.map.identityOf(this.to),
        nullIfEmpty(this.attempt),
      );
    });
  }

  /**
   * Deletes the source's old copy of the shard's rows, table by table in batches of `batchSize`
   * (default 1000), as the mover: each batch only while the source's record is this move's
   * tombstone (the target owns the shard) and the lease is this mover's. The tombstone and its fence
   * stay. Returns the rows deleted per table.
   */
  async cleanup(options: { batchSize?: number } = {}): Promise<Record<string, number>> {
    const batchSize = options.batchSize ?? 1000;
    if (!(Number.isSafeInteger(batchSize) && batchSize >= 1))
      throw new OwnershipOptionsError([`cleanup: batchSize must be an integer >= 1, got ${batchSize}`]);
    const deleted: Record<string, number> = {};
    for (const table of this.map.tables) {
      deleted[table.table] = 0;
      // Each batch is followed by a pause as long as it took: the cleanup (off the critical path,
      // the shard has moved) uses at most about half of a core, and leaves the rest to the writes.
      for (;;) {
        const started = performance.now();
        const batch = await raw(this.from).$transaction(async (tx) => {
          await this.check(tx);
          const [own] = await tx.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
            `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
            this.shard.bits,
          );
          if (!(own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt)))
            throw this.map.conflict(
              this.shard,
              `${this.from.name} holds no tombstone of this move (${own?.state ?? "no record"}): its rows are not an old copy`,
            );
          await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
          return tx.$executeRawUnsafe(
            `DELETE FROM "${table.table}" WHERE ctid IN (SELECT ctid FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1 LIMIT ${batchSize})`,
            this.shard.bits,
          );
        });
        deleted[table.table] = (deleted[table.table] ?? 0) + batch;
        if (batch < batchSize) break;
        await new Promise((r) => setTimeout(r, Math.min(1000, performance.now() - started)));
      }
    }
    return deleted;
  }

  /**
   * Undoes the source's side of a move that did not switch: the source owns the shard again,
   * unarmed (a fence a router gave back already is left as it is). `EpochConflictError` when the
   * source switched already (its record is this move's tombstone: finish the move instead).
   */
  async unfence(): Promise<void> {
    await this.source(async (tx) => {
      await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, attempt = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state IN ('owned', 'fenced') AND (attempt IS NULL OR attempt = $2)`,
        this.shard.bits,
        this.attempt,
      );
      const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null }[]>(
        `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1`,
        this.shard.bits,
      );
      if (own?.state !== "owned" || own.peer !== null)
        throw this.map.conflict(
          this.shard,
          `${this.from.name} holds it ${own?.state ?? "with no record"}: the move cannot be undone there`,
        );
    });
    this.fencedAt = undefined; // the source takes the shard's writes again: no freeze to bound
    await this.map.refresh();
  }

  /**
   * Undoes the target's side of a move that did not switch: deletes what the target holds of the
   * shard, as the mover, table by table in batches of `batchSize` (default 10,000), then its incoming
   * record (which lifts its fence for the shard). Each batch only while the source has not switched
   * to this attempt (checked in the source's transaction that holds the lease) and the target's
   * record is incoming: a target that owns the shard, or holds a tombstone of its own, keeps its rows.
   */
  async discard(options: { batchSize?: number } = {}): Promise<void> {
    const batchSize = options.batchSize ?? 10_000;
    if (!(Number.isSafeInteger(batchSize) && batchSize >= 1))
      throw new OwnershipOptionsError([`discard: batchSize must be an integer >= 1, got ${batchSize}`]);
    /** Whether the target's rows of the shard are this move's copy to discard (throws when the source switched to it). */
    const discardable = async (tx: Raw, source: Raw) => {
      const [own] = await source.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
        `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
        this.shard.bits,
      );
      if (own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt))
        throw this.map.conflict(
          this.shard,
          `${this.from.name} switched it to ${this.to.name}: the copy there is the shard now`,
        );
      const [held] = await tx.$queryRawUnsafe<{ state: string }[]>(
        `SELECT state FROM "ShardOwnership" WHERE shard = $1 FOR UPDATE`,
        this.shard.bits,
      );
      if (held?.state !== "incoming") return false; // nothing received: whatever rows it has are not this move's
      await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
      return true;
    };
    const remove = (tx: Raw, table: FencedTable, limit: string) =>
      tx.$executeRawUnsafe(
        `DELETE FROM "${table.table}" WHERE ctid IN (SELECT ctid FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1${limit})`,
        this.shard.bits,
      );
    for (const table of this.map.tables) {
      for (;;) {
        const batch = await this.target(
          async (tx, source) =>
            (await discardable(tx, source)) ? remove(tx, table, ` LIMIT ${batchSize}`) : undefined,
          { change: false },
        );
        if (batch === undefined) {
          await this.map.refresh();
          return;
        }
        if (batch < batchSize) break;
      }
    }
    // The last rows (none, unless the mover's own sessions wrote meanwhile) and the record, together.
    await this.target(async (tx, source) => {
      if (!(await discardable(tx, source))) return;
      for (const table of this.map.tables) await remove(tx, table, "");
      await tx.$executeRawUnsafe(
        `DELETE FROM "ShardOwnership" WHERE shard = $1 AND state = 'incoming'`,
        this.shard.bits,
      );
    });
    await this.map.refresh();
  }

  /** Brings both databases' fences in line with their records (the target's listing goes once it owns the shard). */
  async tidy(): Promise<void> {
    await this.map.changes.relist(this.to);
    await this.map.changes.relist(this.from);
  }

  /**
   * Ends the move: its record and the keys it noted are deleted (checked against the lease), and
   * renewing stops. Only once the move is finished (the source holds its tombstone) or undone (the
   * source simply owns the shard): a fenced or armed shard whose move's record is gone would never
   * be given back by a router.
   */
  async release(): Promise<void> {
    await raw(this.from).$transaction(async (tx) => {
      await this.check(tx);
      const [own] = await tx.$queryRawUnsafe<
        { state: string; peer: string | null; attempt: string | null }[]
      >(`SELECT state, peer, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`, this.shard.bits);
      const undone = own?.state === "owned" && own.peer === null;
      const finished = own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt);
      if (!undone && !finished)
        throw this.map.conflict(
          this.shard,
          `${this.from.name} holds it ${own ? `${own.state}${own.peer ? ` for ${own.peer}` : ""}` : "with no record"}: finish the move (switch) or undo it (unfence) before releasing its lease`,
        );
      await tx.$executeRawUnsafe(
        `DELETE FROM "ShardMove" WHERE shard = $1 AND attempt = $2 AND token = $3`,
        this.shard.bits,
        this.attempt,
        this.token,
      );
      await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, this.shard.bits);
    });
    this.stop();
  }

  /**
   * Gives the lease up at once without ending the move (a mover that failed and could not undo
   * what it did): its period ends now, so routers refused by its fence give the shard back to its
   * owner at once, and the next move takes it over. Best effort.
   */
  async lapse(): Promise<void> {
    this.stop();
    // Its own deadline (a lease's period), whatever the work that failed had left: unanswered, the
    // lease lapses by itself within its period.
    const deadline = {
      at: performance.now() + this.leaseMs,
      late: () => new MoveTimeoutError(this.shard, "giving the lease up", this.leaseMs),
    };
    await bounded(deadline, () =>
      raw(this.from).$executeRawUnsafe(
        `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() WHERE shard = $1 AND attempt = $2 AND token = $3`,
        this.shard.bits,
        this.attempt,
        this.token,
      ),
    ).catch(() => {});
  }
}

/**
 * The compare-and-set of a takeover: the new token, or undefined when the record is not as read. An
 * abandoned move's step becomes `resume`: it is held again, and nobody else takes it while its lease runs.
 */
async function casTakeOver<Client extends ShardClient>(
  record: MoveRecord<Client>,
  holder: string,
  leaseMs: number,
): Promise<number | undefined> {
  const [row] = await raw(record.database)
    .$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${Math.max(leaseMs, 1000)}ms'`);
      return tx.$queryRawUnsafe<{ token: number }[]>(
        `UPDATE "ShardMove" SET token = token + 1, holder = $4,
         step = CASE WHEN step = 'abandoned' THEN 'resume' ELSE step END,
         "expiresAt" = clock_timestamp() + $5::float8 * interval '1 millisecond', "updatedAt" = clock_timestamp()
       WHERE shard = $1 AND attempt = $2 AND token = $3 AND ("expiresAt" < clock_timestamp() OR step = 'abandoned')
       RETURNING token`,
        record.shard.bits,
        record.attempt,
        record.token,
        holder,
        leaseMs,
      );
    })
    .catch((error: unknown) => {
      if (gaveWay(error)) return []; // its row stayed locked (a holder that is not stopped after all): read again
      throw error;
    });
  return row?.token;
}

/**
 * The second commit of a switch: the target owns the shard at `epoch` (the one the source's
 * tombstone records), but only from this attempt's verified incoming copy. The mover does it right
 * after the decision; a router refused by the target's incoming record does it too when the
 * tombstone it read says the switch was decided (the mover may have died in between). Returns false
 * when it was done already.
 */
export async function completeSwitch<Client extends ShardClient>(
  map: Pick<LeaseMap<Client>, "changes" | "conflict">,
  to: Database<Client>,
  shard: ShardIdentifier,
  attempt: string,
  epoch: number,
): Promise<boolean> {
  return map.changes.change(
    to,
    async (tx) => {
      const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
        `UPDATE "ShardOwnership" SET state = 'owned', epoch = $2, peer = NULL, attempt = NULL, "verifiedBy" = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state = 'incoming' AND attempt = $3 AND "verifiedBy" IS NOT NULL RETURNING epoch`,
        shard.bits,
        epoch,
        attempt,
      );
      if (row) return true;
      const [now] = await tx.$queryRawUnsafe<{ state: string; epoch: number }[]>(
        `SELECT state, epoch FROM "ShardOwnership" WHERE shard = $1`,
        shard.bits,
      );
      if (now && now.epoch >= epoch && now.state !== "incoming") return false;
      throw map.conflict(
        shard,
        `${to.name} holds no verified copy of the switched move (${now ? `${now.state} at epoch ${now.epoch}` : "no record"})`,
      );
    },
    { relist: false },
  );
}

function leaseSettings(options: LeaseOptions): { leaseMs: number; holder: string } {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const issues: string[] = [];
  if (!(Number.isSafeInteger(leaseMs) && leaseMs >= 300))
    issues.push(`leaseMs: expected an integer >= 300, got ${leaseMs}`);
  if (options.holder !== undefined && (typeof options.holder !== "string" || options.holder === ""))
    issues.push("holder: expected a non-empty string");
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  return { leaseMs, holder: options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}` };
}

const nullIfEmpty = (attempt: string) => (attempt === "" ? null : attempt);
