import { hostname } from "node:os";
import { ShardIdentifier } from "@shardkit/id";
import type { Database, OwnershipHook, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { databaseIdentities } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { OwnershipChanges } from "./changes.js";
import {
  DatabasesUnansweredError,
  EpochConflictError,
  InvalidMapError,
  OwnershipOptionsError,
  type Refusal,
  StaleOwnerError,
} from "./errors.js";
import { installFunctions, installing, recordUnrecorded } from "./install.js";
import { completeSwitch, type LeaseOptions, ShardLease } from "./lease.js";
import { type OwnershipRow, type OwnershipState, placeShards } from "./placement.js";
import { bounded, lastLine, type Raw, raw, unbounded } from "./raw.js";
import { refusalOf } from "./refusal.js";
import { type FencedTable, ownershipSchemaIssues } from "./sql.js";
import { listedTableIssues, resolveTables } from "./tables.js";

export type { Raw };
export { raw };

/** One shard in the map: where routing sends it, at which epoch, and in what state. */
export interface MapEntry {
  shard: ShardIdentifier;
  /** The database routing sends its calls to (its registry name). */
  database: string;
  epoch: number;
  /** `owned`: that database owns it; `fenced`: it is between owners (writes are refused and retried). */
  state: OwnershipState;
}

/** What the map counts; `onSignal` hears each as it happens (the telemetry hook). */
export interface OwnershipCounters {
  /** Writes a database refused because it does not own their shard. */
  staleRejections: number;
  /** Times the map was read from the databases. */
  refreshes: number;
  /** Calls run again at the current owner after a refusal. */
  retries: number;
  /** Changes of owner refused because someone else changed the shard first. */
  conflicts: number;
  /** Fences this router gave back to their owner because the move holding them had stopped (its lease lapsed). */
  heals: number;
  /** Switches this router completed at the new owner (decided at the old one, whose mover stopped before). */
  completions: number;
}

export type OwnershipSignal =
  | { type: "stale_rejection"; refusal: Refusal }
  | { type: "refresh"; changed: ShardIdentifier[]; missing: string[]; problems: ShardIdentifier[] }
  | { type: "retry"; shard: ShardIdentifier; attempt: number }
  | { type: "conflict"; shard: ShardIdentifier; message: string }
  | { type: "heal"; shard: ShardIdentifier; database: string }
  | { type: "completion"; shard: ShardIdentifier; database: string };

export interface PartitionMapOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /**
   * The app's tables that hold shard rows, and the column that names a row's shard: a fenced
   * shard's rows are refused in each of them, and a move carries them. `@shardkit/prisma`'s own
   * tables (`OutboxEvent`, `IdempotencyKey`, `ProcessedEvent`, `UniqueClaim`) are included by
   * themselves when the databases have them (`map.tables` says what the map ended up with); listing
   * one too is allowed, by the column its rows name their shard by.
   */
  tables: readonly FencedTable[];
  /** How often `start()` re-reads the map: a router's staleness bound between refusals. Default 1000 ms. */
  refreshIntervalMs?: number;
  /**
   * How long one read of the map (and the open) waits for each database. A database that takes
   * longer is reported as not answering (it keeps its last records; at open, its shards' calls are
   * refused with `DatabasesUnansweredError` until it answers), never read as having no records.
   * Default 5000 ms.
   */
  timeoutMs?: number;
  /**
   * How many times one call runs again after refusals (each time after the map changed). Default 20.
   */
  retries?: number;
  /**
   * How long a write waits, in all, for a shard between owners (fenced, not switched yet) before it
   * fails with `StaleOwnerError`. A write to a shard the router knows is fenced waits in the router
   * (it is not sent to the old owner again and again): the waiting writes share one poll of the two
   * databases concerned (every 10 ms at first), and each runs once the shard is switched or given
   * back to its owner. Default 5000 ms.
   */
  waitMs?: number;
  /**
   * How long a change of owner waits for each lock before it gives way to the writers in its path
   * and tries again (writers wait at most about this long behind a fence). Default 200 ms.
   */
  lockTimeoutMs?: number;
  /** How this router names itself in the records of what it changes (a fence it gives back). Default: host and process id. */
  name?: string;
  /** Every counted event, as it happens. */
  onSignal?(signal: OwnershipSignal): void;
}

/** A record as the router reads it: with, for a fenced shard, whether the lease of the move holding the fence lapsed. */
type Row = OwnershipRow & { lapsed?: boolean | null };

/**
 * The router's read of a database's records, with, for a shard fenced or armed for a move, whether
 * that move's lease lapsed (its mover stopped before the switch).
 */
const RECORDS_SQL = `SELECT o.shard, o.epoch, o.state, o.peer, o.attempt,
    CASE WHEN o.state = 'fenced' OR (o.state = 'owned' AND o.peer IS NOT NULL) THEN
      (SELECT m."expiresAt" < clock_timestamp() AND m.step NOT IN ('switched', 'abandoned')
         FROM "ShardMove" m WHERE m.shard = o.shard AND m.attempt = o.attempt) END AS lapsed
  FROM "ShardOwnership" o`;

/** Why routing refuses a shard's calls: its records cannot be right, or its database has not answered yet. */
type Problem =
  | { kind: "records"; issues: string[] }
  | { kind: "unanswered"; database: Database<ShardClient>; error: string };

/**
 * The partition map: which database owns each logical shard, at which epoch. It is kept in the
 * shard databases themselves: each one's `ShardOwnership` table holds its own record of the shards
 * it owns, is receiving or gave away, and each database enforces its record (its fence refuses
 * writes to shards it does not own). Routers read every database's record, keep the last copy of
 * a database that does not answer, and apply it to the registry; a write refused by a former owner
 * makes them read again and retry at the current one.
 *
 * A shard whose records cannot be right (an epoch behind one already seen, an unknown state, two
 * owners, a missing owner), or whose database has not answered yet, refuses its own calls with a
 * typed error (`InvalidMapError`, `DatabasesUnansweredError`: a 503 naming the shard) while the
 * others work, and recovers by itself once a read finds it right.
 *
 * Changes of owner are made under a lease (`map.lease(shard, to)`, or `moveShard`), by
 * compare-and-set on the records. A router that is refused by a fence whose mover stopped (its
 * lease lapsed) gives the shard back to its owner, and one refused by a switch's new owner before
 * it took over completes the switch: neither waits for a person.
 */
export class PartitionMap<Client extends ShardClient = ShardClient> {
  readonly registry: ShardRegistry<Client>;
  readonly counters: OwnershipCounters = {
    staleRejections: 0,
    refreshes: 0,
    retries: 0,
    conflicts: 0,
    heals: 0,
    completions: 0,
  };
  /** How each database's records change (under its change lock) and its fence follows them. */
  readonly changes: OwnershipChanges<Client>;
  /** How long one read waits for each database (ms). */
  readonly timeoutMs: number;
  /** How this router names itself. */
  readonly name: string;
  private resolved: readonly FencedTable[];
  private readonly refreshIntervalMs: number;
  private readonly retries: number;
  private readonly waitMs: number;
  /** Writes waiting for their fenced shard's placement to change (see `hold`). */
  private readonly waiting = new Set<{
    shard: ShardIdentifier;
    physical: Database<Client>;
    epoch: number;
    deadline: number;
    /** Waiting for a fenced shard: woken when it is no longer fenced too, and failed when its time is up. */
    fenced: boolean;
    wake(error?: unknown): void;
  }>();
  /** Shards whose owner (where routing sends them) records them fenced: their writes wait in the router. */
  private readonly fenced = new Set<number>();
  private polling = false;
  private readonly onSignal: ((signal: OwnershipSignal) => void) | undefined;
  /** The last rows read from each database (kept while it does not answer). */
  private readonly rows = new Map<Database<Client>, Row[]>();
  /** When (in the order reads started) each database's rows in `rows` were read: an older read never replaces a newer. */
  private readonly readAt = new Map<Database<Client>, number>();
  private reads = 0;
  /** Give-backs and completions this router is running (one at a time per shard and kind; see `once`). */
  private readonly inFlight = new Set<string>();
  /** Why each database's latest read failed (absent: it answered). */
  private readonly silent = new Map<Database<Client>, string>();
  /** Databases whose functions are installed as this version has them. */
  private readonly installed = new Set<Database<Client>>();
  /** Shards whose calls routing refuses, and why. */
  private readonly problems = new Map<number, Problem>();
  /** Whether every shard has been recorded (every database answered at once, at open or later). */
  private recorded = false;
  private lastRead = 0;
  private identities = new Map<Database<Client>, string>();
  private reading: Promise<void> | undefined;
  /** The read after the one under way, shared by the callers of `refresh` meanwhile. */
  private nextReading: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The refresh the timer started, until it has ended. */
  private ticking: Promise<void> | undefined;
  private running = false;

  private constructor(options: PartitionMapOptions<Client>) {
    const issues: string[] = [];
    if (!options?.registry || !Array.isArray(options.registry.databases)) issues.push("registry: required");
    issues.push(...listedTableIssues(options?.tables));
    const positive = (value: number | undefined, name: string, fallback: number, integer = false) => {
      if (value === undefined) return fallback;
      if (!(Number.isFinite(value) && value >= (integer ? 0 : 1)) || (integer && !Number.isInteger(value))) {
        issues.push(`${name}: expected ${integer ? "an integer >= 0" : "a number >= 1"}, got ${value}`);
      }
      return value;
    };
    this.refreshIntervalMs = positive(options?.refreshIntervalMs, "refreshIntervalMs", 1000);
    this.timeoutMs = positive(options?.timeoutMs, "timeoutMs", 5000);
    this.retries = positive(options?.retries, "retries", 20, true);
    this.waitMs = positive(options?.waitMs, "waitMs", 5000);
    const lockTimeoutMs = positive(options?.lockTimeoutMs, "lockTimeoutMs", 200);
    if (options?.name !== undefined && (typeof options.name !== "string" || options.name === ""))
      issues.push("name: expected a non-empty string");
    if (issues.length > 0) throw new OwnershipOptionsError(issues);
    this.registry = options.registry;
    this.resolved = options.tables;
    this.onSignal = options.onSignal;
    this.name = options.name ?? `router ${hostname()}:${process.pid}`;
    this.changes = new OwnershipChanges<Client>(() => this.resolved, lockTimeoutMs);
  }

  /**
   * The tables holding shard rows (fenced, moved and cleaned up table by table): the ones the map
   * was opened with, then `@shardkit/prisma`'s own tables that the databases have.
   */
  get tables(): readonly FencedTable[] {
    return this.resolved;
  }

  /**
   * Opens the map over a registry: waits for each database up to `timeoutMs`, checks that those
   * that answered have @shardkit/ownership's schema, finds which of `@shardkit/prisma`'s tables they
   * have (and adds them to `tables`), installs the refusal function, records the configured placement
   * as epoch 1 for shards no database has a record of (only when every database answers, so a shard
   * that moved to a database that is down is never given a second owner), reads the map, and
   * attaches it to the registry's routing.
   *
   * A database that does not answer in time is not taken for one without records: its shards' calls
   * are refused (`DatabasesUnansweredError`) until a later read finds it; with no database answering,
   * the open fails with that error. Service instances may open their maps at the same moment: each
   * database's install and recording run under an advisory lock of their own, and a function already
   * installed as this version has it is left alone (no DDL at all on an ordinary start). Once its
   * databases have answered, the install and recording wait at most 30 s for them (`INSTALL_TIMEOUT_MS`):
   * a lock that is never given, or a server that froze since, fails the open with
   * `DatabasesUnansweredError`.
   */
  static async open<Client extends ShardClient>(
    options: PartitionMapOptions<Client>,
  ): Promise<PartitionMap<Client>> {
    const map = new PartitionMap(options);
    await map.install();
    await map.refresh();
    map.registry.attachOwnership(map.hook());
    return map;
  }

  private async install(): Promise<void> {
    this.identities = await databaseIdentities(this.registry, { timeoutMs: this.timeoutMs });
    const reachable = this.registry.databases.filter((p) => this.identities.has(p));
    if (reachable.length === 0)
      throw new DatabasesUnansweredError(
        `the partition map cannot be opened: no database answered within ${this.timeoutMs} ms`,
        this.registry.databases.map((p) => ({
          database: p.name,
          error: `no answer in ${this.timeoutMs} ms`,
        })),
      );
    await bounded(installing(), async () => {
      const schema = (await Promise.all(reachable.map((p) => ownershipSchemaIssues(raw(p), p.name)))).flat();
      if (schema.length > 0) throw new OwnershipOptionsError(schema);
      const found = await resolveTables(reachable, this.resolved, { timeoutMs: this.timeoutMs });
      if (found.issues.length > 0) throw new OwnershipOptionsError(found.issues);
      this.resolved = found.tables;
      await Promise.all(reachable.map((p) => this.installIn(p)));
      if (reachable.length < this.registry.databases.length) return;
      await this.recordUnrecorded();
    });
  }

  /** Installs shardkit's functions in `physical` (once per map). */
  private async installIn(physical: Database<Client>): Promise<void> {
    if (this.installed.has(physical)) return;
    await installFunctions(raw(physical));
    this.installed.add(physical);
  }

  /** Records the placement of the shards no database has a record of (see `recordUnrecorded`). */
  private async recordUnrecorded(): Promise<void> {
    await recordUnrecorded(this.registry.databases, (p) => this.identityOf(p));
    this.recorded = true;
  }

  /**
   * Reads every database's record and applies it to the registry, shard by shard: a shard whose
   * records cannot be right is left where it was and its calls are refused until a read finds it
   * right (`problems()`), the others are applied. A database that does not answer in time keeps its
   * last record. One read at a time, and every read a caller gets started after its call: callers
   * while a read is under way share the next one.
   */
  refresh(): Promise<void> {
    if (!this.reading) {
      // A read is shared by every caller meanwhile (routers, movers), so it runs under none's
      // deadline: its own bound is `timeoutMs` per database.
      this.reading = unbounded(() => this.read()).finally(() => {
        this.reading = undefined;
      });
      return this.reading;
    }
    // A read under way may have started before this call (before the refusal or the change that
    // led to it): the next read, shared by every caller meanwhile, starts once it is done.
    this.nextReading ??= this.reading
      .catch(() => {})
      .then(() => {
        this.nextReading = undefined;
        return this.refresh();
      });
    return this.nextReading;
  }

  /** Reads the records of `only` (default: every database) and applies the map they make with the others' last records. */
  private async read(only?: readonly Database<Client>[]): Promise<void> {
    const result = await scatter(
      only ?? this.registry.databases,
      async (physical) => {
        // A database read for the first time gets shardkit's functions first (it was down at open).
        if (!this.installed.has(physical)) await this.installIn(physical);
        const at = ++this.reads;
        return { at, rows: await raw(physical).$queryRawUnsafe<Row[]>(RECORDS_SQL) };
      },
      { policy: "partial", targetTimeoutMs: this.timeoutMs, key: (p) => p.name },
    );
    for (const outcome of result.outcomes) {
      if (outcome.status !== "fulfilled") continue;
      this.silent.delete(outcome.target);
      // Reads overlap (a full refresh, the poll of held writes): a read that started before the one
      // these rows came from must not put older records back.
      if ((this.readAt.get(outcome.target) ?? 0) > outcome.value.at) continue;
      this.readAt.set(outcome.target, outcome.value.at);
      this.rows.set(outcome.target, outcome.value.rows);
    }
    for (const m of result.missing) {
      this.silent.set(
        m.target,
        m.reason === "timeout" ? `no answer in ${this.timeoutMs} ms` : lastLine(m.error),
      );
    }
    if (!only && this.identities.size < this.registry.databases.length) {
      for (const [p, id] of await databaseIdentities(this.registry, { timeoutMs: this.timeoutMs })) {
        this.identities.set(p, id);
      }
    }
    if (
      !only &&
      !this.recorded &&
      this.rows.size === this.registry.databases.length &&
      this.silent.size === 0
    ) {
      await bounded(installing(), () => this.recordUnrecorded()).catch(() => {});
      if (this.recorded) return this.read();
    }
    const changed: ShardIdentifier[] = [];
    this.problems.clear();
    const { placements } = placeShards(this.registry, this.rows, this.identities);
    for (const { shard, owner, epoch, state, configured, issues } of placements) {
      const problems = [...issues];
      if (owner !== null && epoch !== null && epoch < this.registry.epochOf(shard))
        problems.push(
          `epoch ${epoch} at ${owner.name} is behind epoch ${this.registry.epochOf(shard)} already seen (a record set back?)`,
        );
      if (owner === null && state === "unknown" && !this.rows.has(configured)) {
        this.problems.set(shard.bits, {
          kind: "unanswered",
          database: configured as Database<ShardClient>,
          error: this.silent.get(configured) ?? "not read yet",
        });
        continue;
      }
      if (owner === null && state === "unknown")
        problems.push(`no database owns it by the records read (${describeRecords(this.rows, shard)})`);
      if (owner === null && state === "unrecorded" && this.recorded)
        problems.push(
          `${configured.name} has no record of it, though the map recorded every shard: its record was deleted`,
        );
      if (problems.length > 0) {
        this.problems.set(shard.bits, { kind: "records", issues: problems });
        continue;
      }
      if (owner === null || epoch === null) continue; // unrecorded before any open recorded it: the configuration holds
      if (this.registry.databaseOf(shard) === owner && this.registry.epochOf(shard) === epoch) continue;
      this.registry.assign(shard, owner, epoch);
      changed.push(shard);
    }
    this.fenced.clear();
    for (const shard of this.registry.shards) {
      const owner = this.registry.databaseOf(shard);
      const row = this.rows.get(owner)?.find((r) => r.shard === shard.bits);
      if (row?.state === "fenced") this.fenced.add(shard.bits);
      // Armed for a move whose mover stopped (its lease lapsed): no write is refused, so no refusal
      // will lead a router here; the read gives it back (its writes stop noting their keys).
      if (row?.state === "owned" && row.peer !== null && row.lapsed) void this.giveBack(owner, shard);
    }
    this.lastRead = performance.now();
    this.counters.refreshes++;
    this.onSignal?.({
      type: "refresh",
      changed,
      missing: result.missing.map((m) => m.target.name),
      problems: [...this.problems.keys()].map((bits) => ShardIdentifier.fromBits(bits)),
    });
  }

  /**
   * The shards whose calls routing refuses now, and why: records that cannot be right (each
   * problem), or a database that has not answered the map's read yet.
   */
  problemsOf(): { shard: ShardIdentifier; issues: string[] }[] {
    return [...this.problems].map(([bits, problem]) => ({
      shard: ShardIdentifier.fromBits(bits),
      issues:
        problem.kind === "records"
          ? problem.issues
          : [`${problem.database.name} has not answered the map's read (${problem.error})`],
    }));
  }

  /** The databases whose latest read failed, and why. */
  unanswered(): Map<Database<Client>, string> {
    return new Map(this.silent);
  }

  /** Whether `physical` may hold records of `shard`: it was never read, or its last records name it. */
  mayRecord(physical: Database<Client>, shard: ShardIdentifier): boolean {
    const rows = this.rows.get(physical);
    return rows === undefined || rows.some((r) => r.shard === shard.bits);
  }

  /** Each shard: where routing sends it now, its epoch and state. */
  entries(): MapEntry[] {
    return this.registry.shards.map((shard) => {
      const physical = this.registry.databaseOf(shard);
      const row = this.rows.get(physical)?.find((r) => r.shard === shard.bits);
      return {
        shard,
        database: physical.name,
        epoch: this.registry.epochOf(shard),
        state: (row?.state ?? "owned") as OwnershipState,
      };
    });
  }

  /** Re-reads the map every `refreshIntervalMs` until `stop()`; a failed read is retried at the next tick. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const tick = () => {
      this.timer = setTimeout(() => {
        this.ticking = this.refresh()
          .catch(() => {})
          .finally(() => {
            this.ticking = undefined;
            if (this.running) tick();
          });
      }, this.refreshIntervalMs);
      this.timer.unref?.();
    };
    tick();
  }

  /**
   * Stops refreshing. Resolves once a refresh the timer had started has ended, so no signal of it
   * comes after (at once when none was running).
   */
  stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    return this.ticking ?? Promise.resolve();
  }

  /**
   * Takes the lease of a change of owner of `shard` to `to` (see `ShardLease`): the way to change an
   * owner by hand, step by step; `moveShard` takes one itself. The map is read first. A move of the
   * shard whose lease is live refuses it (`MoveInProgressError`); one whose lease lapsed must be
   * finished or undone first (`moveShard` does).
   */
  async lease(
    shardRef: ShardIdentifier | string,
    to: Database<Client>,
    options: LeaseOptions = {},
  ): Promise<ShardLease<Client>> {
    const shard = this.shard(shardRef);
    if (!this.registry.databases.includes(to))
      throw new OwnershipOptionsError(["to: not a database of the map's registry"]);
    await this.refresh();
    return ShardLease.acquire(this, shard, to, options);
  }

  /** Stops refreshing and detaches the map from routing. */
  close(): void {
    void this.stop();
    this.registry.attachOwnership(undefined);
  }

  /** What a database says it is (`server:port/database`); throws when it has not answered yet. */
  identityOf(physical: Database<Client>): string {
    const id = this.identities.get(physical);
    if (!id)
      throw new OwnershipOptionsError([`${physical.name} has not answered yet: its identity is unknown`]);
    return id;
  }

  private shard(ref: ShardIdentifier | string): ShardIdentifier {
    const shard = ref instanceof ShardIdentifier ? ref : ShardIdentifier.parse(ref);
    return this.registry.resolve(shard);
  }

  /** Counts a change of owner refused because someone else changed the shard first, and returns its error. */
  conflict(shard: ShardIdentifier, message: string): EpochConflictError {
    this.counters.conflicts++;
    this.onSignal?.({ type: "conflict", shard, message });
    return new EpochConflictError(shard, message);
  }

  /**
   * `heal`, at most one at a time per shard in this router, bounded by `timeoutMs` (a frozen
   * database must not hold the router's waiting writes): whether it gave the shard back.
   */
  private giveBack(database: Database<Client>, shard: ShardIdentifier): Promise<boolean> {
    return this.once(`heal ${shard.bits}`, () => this.heal(database, shard));
  }

  /**
   * Runs `work` unless work of the same `key` is running in this router, bounded by `timeoutMs`
   * (false when it failed, did not finish in time, or was already running).
   */
  private async once(key: string, work: () => Promise<boolean>): Promise<boolean> {
    if (this.inFlight.has(key)) return false;
    this.inFlight.add(key);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        // Work shared by this router's callers, a mover among them: under none's deadline.
        unbounded(work).catch(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), this.timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(key);
    }
  }

  /**
   * Gives a fenced (or armed) shard back to `database`, its owner, when the move holding it has
   * stopped: its lease lapsed (its mover died, hangs, or gave it up) before it switched. One transaction under
   * the database's change lock, by compare-and-set on the same record a switch changes, so the two
   * never both succeed: the move's record is locked and must still be lapsed and unswitched, the
   * record must still be fenced by that move; the record becomes owned again and the move's token
   * grows (its mover, should it wake up, is refused at its next step) and it is marked abandoned
   * (the next move of the shard takes it over and undoes what is left: the target's copy, the
   * replication objects). No DDL: the shard's fence listing stays until then.
   */
  private async heal(database: Database<Client>, shard: ShardIdentifier): Promise<boolean> {
    const healed = await this.changes.locked(database, async (tx) => {
      const [move] = await tx.$queryRawUnsafe<{ attempt: string; step: string; lapsed: boolean }[]>(
        `SELECT attempt, step, "expiresAt" < clock_timestamp() AS lapsed FROM "ShardMove" WHERE shard = $1 FOR UPDATE`,
        shard.bits,
      );
      if (!move?.lapsed || move.attempt === "" || move.step === "switched" || move.step === "abandoned")
        return false;
      const given = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, attempt = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state IN ('fenced', 'owned') AND attempt = $2`,
        shard.bits,
        move.attempt,
      );
      if (given !== 1) return false;
      await tx.$executeRawUnsafe(
        `UPDATE "ShardMove" SET token = token + 1, step = 'abandoned', holder = $2, "updatedAt" = clock_timestamp()
         WHERE shard = $1`,
        shard.bits,
        `${this.name}, which gave the shard back to ${database.name} after the lease lapsed`,
      );
      return true;
    });
    if (healed) {
      this.counters.heals++;
      this.onSignal?.({ type: "heal", shard, database: database.name });
    }
    return healed;
  }

  /**
   * Completes a switch decided at the old owner (its tombstone of a move attempt names `database`)
   * when `database` still holds the shard incoming: its mover stopped between the two commits. The
   * tombstone is read from this router's map (refreshed just before).
   */
  private async complete(
    database: Database<Client>,
    shard: ShardIdentifier,
    attempt: string | null | undefined,
  ): Promise<boolean> {
    const identity = this.identities.get(database);
    if (!attempt || !identity) return false;
    for (const rows of this.rows.values()) {
      const tombstone = rows.find(
        (r) => r.shard === shard.bits && r.state === "moved" && r.peer === identity && r.attempt === attempt,
      );
      if (!tombstone) continue;
      const done = await completeSwitch(this, database, shard, attempt, tombstone.epoch);
      if (done) {
        this.counters.completions++;
        this.onSignal?.({ type: "completion", shard, database: database.name });
      }
      return done;
    }
    return false;
  }

  /**
   * After a refusal of a call for `refusal.shard`: gives a fence whose mover stopped back to its
   * owner, or completes a decided switch, then reads the map. When routing would still send the shard
   * where it was refused and it is fenced there (between owners), the call waits in the router
   * (`hold`) instead of being sent there again. A shard whose records cannot be right fails with its
   * typed error at once.
   */
  private async settle(refusal: Refusal): Promise<void> {
    const { shard } = refusal;
    const physical = this.registry.databaseOf(shard);
    const epoch = this.registry.epochOf(shard);
    if (refusal.state === "fenced" && refusal.move?.lapsed && refusal.move.step !== "switched")
      await this.giveBack(physical, shard);
    await this.refresh();
    if (
      refusal.state === "incoming" &&
      (await this.complete(physical, shard, refusal.attempt).catch(() => false))
    ) {
      await this.refresh();
      return; // the target owns it now: run again there
    }
    this.refuseProblem(shard);
    if (this.registry.databaseOf(shard) !== physical || this.registry.epochOf(shard) !== epoch) return;
    if (this.fenced.has(shard.bits)) return this.hold(shard);
    // Refused, yet the map read says nothing changed (a record changed between the refusal and the
    // read, or a database that did not answer): one short wait for the map to catch up.
    await this.hold(shard, Math.min(this.waitMs, 250), false);
  }

  /**
   * Waits, in the router, until `shard`'s placement changes (switched: it runs at the new owner), it
   * is no longer fenced (given back), or `ms` (default `waitMs`) have passed: then, when `fail`, it
   * fails with `StaleOwnerError`. Every waiting call shares one poll of the databases concerned (the
   * owner and where the shard moves to), every 10 ms at first and less often as the wait grows. A
   * fence whose move's lease lapsed meanwhile is given back to its owner by the poll. With
   * `fenced: false` (a refusal the map does not explain yet), it waits only for a change of
   * placement, or `ms`, and then runs again.
   */
  private hold(shard: ShardIdentifier, ms = this.waitMs, fenced = true): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        shard,
        physical: this.registry.databaseOf(shard),
        epoch: this.registry.epochOf(shard),
        deadline: performance.now() + ms,
        fenced,
        wake: (error?: unknown) => {
          this.waiting.delete(waiter);
          if (error && fenced) reject(error);
          else resolve();
        },
      };
      this.waiting.add(waiter);
      void this.poll();
    });
  }

  /** Throws the typed error of a shard whose calls routing refuses (see `problemsOf`). */
  private refuseProblem(shard: ShardIdentifier): void {
    const problem = this.problems.get(shard.bits);
    if (!problem) return;
    if (problem.kind === "records") throw new InvalidMapError(problem.issues, shard);
    throw new DatabasesUnansweredError(
      `shard ${shard.key}: its database has not answered the partition map's read, so who owns it is not known`,
      [{ database: problem.database.name, error: problem.error }],
    );
  }

  /**
   * Before a call to `shard`: nothing for a shard with no problem (the usual case: two set lookups).
   * A shard whose calls routing refuses: the map is read again (at most once per
   * `refreshIntervalMs`, shared by every such call) and the call refused if the problem is still
   * there. A write to a shard the router knows is fenced: it waits in the router (`hold`).
   */
  private admit(shard: ShardIdentifier, call: { write: boolean }): Promise<void> | undefined {
    if (this.problems.has(shard.bits))
      return (async () => {
        if (performance.now() - this.lastRead >= this.refreshIntervalMs) await this.refresh().catch(() => {});
        this.refuseProblem(shard);
      })();
    if (call.write && this.fenced.has(shard.bits)) return this.hold(shard);
    return undefined;
  }

  /**
   * Reads, while calls wait, the databases concerned (each waiting shard's owner and where it moves
   * to), every 10 ms at first and up to every 100 ms as the oldest wait grows, and wakes the calls
   * whose shard's placement changed, is no longer fenced, or whose time is up. A fence whose move's
   * lease lapsed is given back to its owner first.
   */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      for (let round = 0; this.waiting.size > 0; round++) {
        await new Promise((r) => setTimeout(r, Math.min(100, 10 + round * 2)));
        const concerned = new Set<Database<Client>>();
        for (const w of this.waiting) {
          concerned.add(w.physical);
          const peer = this.rowOf(w.physical, w.shard)?.peer;
          const to = peer ? this.registry.databases.find((p) => this.identities.get(p) === peer) : undefined;
          if (to) concerned.add(to);
        }
        await this.read([...concerned]).catch(() => {});
        const now = performance.now();
        const lapsed = new Map<number, Database<Client>>();
        const decided = new Map<number, { to: Database<Client>; attempt: string }>();
        for (const w of this.waiting) {
          const row = this.rowOf(w.physical, w.shard);
          const placed =
            this.registry.databaseOf(w.shard) !== w.physical ||
            this.registry.epochOf(w.shard) !== w.epoch ||
            this.problems.has(w.shard.bits);
          // The switch is decided at the old owner (its tombstone places the shard at the new one)
          // and the new owner holds it incoming still (its mover is between the two commits, or
          // stopped there): the call waits until the new owner takes it, completed by this router,
          // rather than be refused there.
          const to = this.registry.databaseOf(w.shard);
          const incoming = this.rowOf(to, w.shard);
          if (
            incoming?.state === "incoming" &&
            incoming.attempt &&
            !this.problems.has(w.shard.bits) &&
            now <= w.deadline
          ) {
            decided.set(w.shard.bits, { to, attempt: incoming.attempt });
          } else if (placed || (w.fenced && row?.state !== "fenced")) {
            w.wake();
          } else if (now > w.deadline) {
            w.wake(
              new StaleOwnerError({
                shard: w.shard,
                epoch: row?.epoch ?? 0,
                state: row?.state ?? "unknown",
                peer: row?.peer ?? null,
                attempt: row?.attempt ?? null,
                move: null,
              }),
            );
          } else if (row?.state === "fenced" && row.lapsed) {
            lapsed.set(w.shard.bits, w.physical);
          }
        }
        // A fence whose move's lease lapsed: given back once per shard, not once per waiting write,
        // and without holding up the wake-ups of the others.
        for (const [bits, physical] of lapsed) void this.giveBack(physical, ShardIdentifier.fromBits(bits));
        for (const [bits, { to, attempt }] of decided)
          void this.once(`complete ${bits}`, () =>
            this.complete(to, ShardIdentifier.fromBits(bits), attempt),
          );
      }
    } finally {
      this.polling = false;
    }
  }

  /** This router's last copy of `physical`'s record of `shard`. */
  private rowOf(physical: Database<Client>, shard: ShardIdentifier): Row | undefined {
    return this.rows.get(physical)?.find((r) => r.shard === shard.bits);
  }

  /** The record check run in a shard transaction first, and after an answer that found nothing. */
  private async assertOwner(client: object, shard: ShardIdentifier): Promise<void> {
    const epoch = this.registry.epochOf(shard);
    if (epoch === 0) return; // no record of the shard yet (no map has recorded it): nothing to assert
    await (client as Raw).$queryRawUnsafe(
      "SELECT shardkit_assert_owner($1, $2)::text AS epoch",
      shard.bits,
      epoch,
    );
  }

  /** What routing calls (see `OwnershipHook`). */
  private hook(): OwnershipHook {
    return {
      retries: this.retries,
      rejection: (error) => {
        // The router's own answer (a shard fenced for longer than `waitMs`) is not a database's refusal.
        if (error instanceof StaleOwnerError) return undefined;
        const refusal = refusalOf(error);
        if (!refusal) return undefined;
        this.counters.staleRejections++;
        this.onSignal?.({ type: "stale_rejection", refusal });
        return { shard: refusal.shard, refusal };
      },
      refresh: async (rejected, attempt) => {
        this.counters.retries++;
        this.onSignal?.({ type: "retry", shard: rejected.shard, attempt });
        const refusal = (rejected as { refusal?: Refusal }).refusal;
        await this.settle(refusal ?? { shard: rejected.shard, epoch: 0, state: "unknown", peer: null });
      },
      admit: (shard, call) => this.admit(shard, call),
      begin: (tx, shard) => this.assertOwner(tx, shard),
      confirm: (client, shard) => this.assertOwner(client, shard),
      giveUp: (error) => new StaleOwnerError(refusalOf(error)!, { cause: error }),
    };
  }
}

/** The records of a shard, as one line: `a fenced at epoch 2, e incoming at epoch 2`. */
function describeRecords<Client extends ShardClient>(
  rows: ReadonlyMap<Database<Client>, readonly Row[]>,
  shard: ShardIdentifier,
): string {
  const held = [...rows].flatMap(([p, list]) =>
    list.filter((r) => r.shard === shard.bits).map((r) => `${p.name} ${r.state} at epoch ${r.epoch}`),
  );
  return held.length > 0 ? held.join(", ") : "none";
}
