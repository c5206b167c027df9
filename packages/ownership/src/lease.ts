// `ShardLease`, the lease of one move of one shard: its state (held or lost, when it fenced, whether
// it switched, its freeze budget), its renewal and the guard every step runs, and the steps of a
// change of owner as its methods. Taking a lease is in lease-take.ts, the steps that change the
// owner in lease-switch.ts, the ones that end a move in lease-end.ts, the transactions they run in
// in lease-held.ts: each a function of the `Held` lease this class hands it.
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { MoveLeaseLostError } from "./errors.js";
import * as ending from "./lease-end.js";
import { atSource, type Held } from "./lease-held.js";
import * as switching from "./lease-switch.js";
import { type LeaseOptions, type Taken, takeLease, takeOverLease } from "./lease-take.js";
import { type Raw, raw, unbounded } from "./raw.js";
import {
  inProgress,
  isLive,
  type LeaseMap,
  type MoveRecord,
  type MoveRow,
  moveNames,
  readMove,
} from "./records.js";

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
  /** The source: where the lease lives. */
  readonly from: Database<Client>;
  readonly to: Database<Client>;
  readonly attempt: string;
  readonly holder: string;
  readonly leaseMs: number;
  private readonly token: number;
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
    taken: Taken<Client>,
  ) {
    this.from = taken.from;
    this.to = taken.to;
    this.attempt = taken.attempt;
    this.token = taken.token;
    this.holder = taken.holder;
    this.leaseMs = taken.leaseMs;
    this.names = moveNames(shard, taken.attempt);
    this.freezeBudgetMs = taken.leaseMs;
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
    return new ShardLease(map, shard, await takeLease(map, shard, to, options));
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
    return new ShardLease(map, record.shard, await takeOverLease(map, record, options));
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
    const now = await readMove(raw(this.from), this.shard);
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
    const now = await readMove(tx, this.shard);
    throw this.lose(now);
  }

  /**
   * Takes this lease's move over again, by compare-and-set on its token, once nobody holds it: its
   * lease lapsed (this mover was too slow, or stuck) or a router gave its fenced shard back to its
   * owner (`givenBack`). The new lease may then undo the move. `MoveInProgressError` when another
   * mover holds it, `EpochConflictError` when it was finished or undone meanwhile.
   */
  async retake(): Promise<{ lease: ShardLease<Client>; givenBack: boolean }> {
    const now = await readMove(raw(this.from), this.shard);
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

  /** This lease as its steps see it (lease-held.ts): the move, its token, and the guard. */
  private held(): Held<Client> {
    const { map, shard, from, to, attempt, token, leaseMs } = this;
    return { map, shard, from, to, attempt, token, leaseMs, check: (tx, step) => this.check(tx, step) };
  }

  /** `fn` in a transaction at the source that checked the lease (and holds its row until it commits). */
  atSource<R>(fn: (tx: Raw) => Promise<R>): Promise<R> {
    return atSource(this.held(), fn, { relist: false });
  }

  /**
   * Lists the shard in its owner's fence while the owner still owns it, naming where it will go: its
   * writes then read its record (and note the keys of the rows they write, which the move verifies
   * again inside its fence), and the fence that follows is one row update, with no DDL waiting for
   * every writer of the tables.
   */
  async arm(): Promise<void> {
    await switching.arm(this.held());
  }

  /**
   * The target records the shard as incoming for this attempt (at the source's epoch) and fences it:
   * nothing but the mover's own sessions and replication write its rows there until the switch.
   */
  async receive(): Promise<void> {
    await switching.receive(this.held());
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
    const epoch = await switching.fence(this.held()).catch((error: unknown) => {
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
    return switching.copyIn(this.held(), fn);
  }

  /**
   * Records at the target that this lease (its fencing token) checked the copy: a switch takes no
   * other. A lease that took a move over, or a fence a router gave back meanwhile, must check again.
   */
  async verified(): Promise<void> {
    await switching.verified(this.held());
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
    await switching.completeSwitch(this.map, this.to, this.shard, this.attempt, epoch);
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
    const epoch = await switching.decide(this.held());
    this.decidedSwitch = true;
    return { epoch };
  }

  /**
   * A move of an earlier version that switched (the target owns the shard at `epoch`) but did not
   * record the source's tombstone: records it.
   */
  async entomb(epoch: number): Promise<void> {
    await switching.entomb(this.held(), epoch);
  }

  /**
   * Deletes the source's old copy of the shard's rows, table by table in batches of `batchSize`
   * (default 1000), as the mover: each batch only while the source's record is this move's
   * tombstone (the target owns the shard) and the lease is this mover's. The tombstone and its fence
   * stay. Returns the rows deleted per table.
   */
  cleanup(options: { batchSize?: number } = {}): Promise<Record<string, number>> {
    return ending.cleanup(this.held(), options);
  }

  /**
   * Undoes the source's side of a move that did not switch: the source owns the shard again,
   * unarmed (a fence a router gave back already is left as it is). `EpochConflictError` when the
   * source switched already (its record is this move's tombstone: finish the move instead).
   */
  async unfence(): Promise<void> {
    await ending.unfence(this.held());
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
    await ending.discard(this.held(), options);
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
    await ending.release(this.held());
    this.stop();
  }

  /**
   * Gives the lease up at once without ending the move (a mover that failed and could not undo
   * what it did): its period ends now, so routers refused by its fence give the shard back to its
   * owner at once, and the next move takes it over. Best effort.
   */
  async lapse(): Promise<void> {
    this.stop();
    await ending.lapse(this.held());
  }
}
