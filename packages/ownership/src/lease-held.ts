// A move's lease as its steps hold it (`HeldLease`): which move, under which fencing token, its state
// (held or lost, when it fenced, whether it switched, its freeze budget), its renewal, the guard every
// step runs, and the two transactions every step runs in: at the source after the lease's check, and
// at the target nested in one at the source that holds the lease's row until the target has
// committed. The steps that change the owner are `SwitchingLease`'s (lease-switch.ts); taking a lease
// and the steps that end a move are `ShardLease`'s (lease.ts).
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { MoveLeaseLostError } from "./errors.js";
import type { Taken } from "./lease-take.js";
import { type Raw, raw, unbounded } from "./raw.js";
import { type LeaseMap, type MoveRow, moveNames, readMove } from "./records.js";

/** A held lease of one move of one shard: its state, renewal and guard (see `ShardLease`). */
export abstract class HeldLease<Client extends ShardClient = ShardClient> {
  /** The names of this attempt's publication (on the source) and subscription and slot (the target's, on the source). */
  readonly names: { publication: string; subscription: string };
  /** The source: where the lease lives. */
  readonly from: Database<Client>;
  readonly to: Database<Client>;
  readonly attempt: string;
  readonly holder: string;
  readonly leaseMs: number;
  /** The fencing token the lease holds the move with. */
  readonly token: number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lost: MoveLeaseLostError | undefined;
  /** When this lease fenced the shard (its writes wait from then until the switch); undefined before. */
  protected fencedAt: number | undefined;
  /** Whether this lease decided the switch (the freeze is over as far as the source is concerned). */
  protected decidedSwitch = false;
  /** How long the shard may stay fenced by this lease without a switch (ms): the lease never runs past it. */
  private freezeBudgetMs: number;
  /** A renewal of the timer still running (the next tick is skipped rather than queued behind it). */
  private renewing = false;

  protected constructor(
    readonly map: LeaseMap<Client>,
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
    return this.sourceStep(fn, { relist: false });
  }

  /** `fn` in a change of the source's records (its change lock), after the lease's check. */
  protected sourceStep<R>(
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
  protected async targetStep<R>(
    fn: (tx: Raw, source: Raw) => Promise<R>,
    options: { list?: number; change?: boolean; relist?: boolean } = {},
  ): Promise<R> {
    const { map } = this;
    const changing = options.change !== false;
    if (changing && options.list !== undefined) await map.changes.relist(this.to, [options.list]);
    const bounded = async (tx: Raw) => {
      await tx.$executeRawUnsafe(`SET LOCAL idle_in_transaction_session_timeout = '${this.leaseMs}ms'`);
      return fn(tx, source);
    };
    let source!: Raw;
    const result = await map.changes.locked(this.from, async (locked) => {
      source = locked;
      await this.check(source);
      if (!changing) return raw(this.to).$transaction(bounded, { timeout: 60_000, maxWait: 30_000 });
      return map.changes.change(this.to, bounded, {
        ...(options.list !== undefined ? { list: options.list } : {}),
        relist: false,
      });
    });
    if (changing && options.relist !== false) await map.changes.relist(this.to).catch(() => {});
    return result;
  }
}

/** The attempt as the records store it: an earlier version's move has none (`""`), recorded as null. */
export const nullIfEmpty = (attempt: string) => (attempt === "" ? null : attempt);
