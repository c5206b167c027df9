// `PartitionMap`: a router's partition map, its options, and what routing calls (its hook). What it
// is made of lives beside it: its view of the records (router-view.ts), the waits of calls to a shard
// between owners (router-wait.ts), the repairs it makes itself (heal.ts), its install in the
// databases (install.ts), its announcements of changes (announce.ts), and its counters and signals
// (signals.ts). A little over 400 lines: the options and the open are documented where they are.
import { hostname } from "node:os";
import { ShardIdentifier } from "@shardkit/id";
import type { Database, OwnershipHook, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { Announcer } from "./announce.js";
import { OwnershipChanges } from "./changes.js";
import { EpochConflictError, OwnershipOptionsError, type Refusal, StaleOwnerError } from "./errors.js";
import { RouterRepairs } from "./heal.js";
import { MapInstall } from "./install.js";
import type { OwnershipState } from "./owners.js";
import { type Raw, unbounded } from "./raw.js";
import { refusalOf } from "./refusal.js";
import { RouterView } from "./router-view.js";
import { RouterWaits } from "./router-wait.js";
import { type OwnershipCounters, type OwnershipSignal, Signals } from "./signals.js";
import type { FencedTable } from "./sql.js";
import { listedTableIssues } from "./tables.js";

/** One shard in the map: where routing sends it, at which epoch, and in what state. */
export interface MapEntry {
  shard: ShardIdentifier;
  /** The database routing sends its calls to (its registry name). */
  database: string;
  epoch: number;
  /** `owned`: that database owns it; `fenced`: it is between owners (writes are refused and retried). */
  state: OwnershipState;
}

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
  /**
   * How often `start()` checks the map: one small statement to one database, in turn (the map's
   * version and a digest of its records): every change of records is announced in every database,
   * so one look tells whether anything changed anywhere. Only then is every database looked at,
   * and a database read in full only where its records changed. It bounds how long a read outside a
   * shard transaction may still be answered by a shard's former owner after a switch (writes, reads
   * in `$transactionOn` and answers that found nothing are never served by a former owner, whatever
   * it is). Default 1000 ms.
   */
  refreshIntervalMs?: number;
  /**
   * How often `start()` looks at every database, whatever the versions say (one small statement
   * each): what catches a change made without an announcement (a record changed by hand, a changer
   * that died between its change and its announcement). Routers x databases / this interval, plus
   * routers / `refreshIntervalMs`, is what an idle fleet's checks cost the servers
   * (docs/scaling.md). Default 30000 ms.
   */
  sweepIntervalMs?: number;
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
 * Changes of owner are made under a lease (`ShardLease.take(map, shard, to)`, or `moveShard`), by
 * compare-and-set on the records. A router that is refused by a fence whose mover stopped (its
 * lease lapsed) gives the shard back to its owner, and one refused by a switch's new owner before
 * it took over completes the switch: neither waits for a person.
 */
export class PartitionMap<Client extends ShardClient = ShardClient> {
  readonly registry: ShardRegistry<Client>;
  readonly counters: OwnershipCounters;
  /** How each database's records change (under its change lock) and its fence follows them. */
  readonly changes: OwnershipChanges<Client>;
  /** How long one read waits for each database (ms). */
  readonly timeoutMs: number;
  /** How this router names itself. */
  readonly name: string;
  private resolved: readonly FencedTable[];
  private readonly refreshIntervalMs: number;
  /** How often, at most, a call makes the map look at its database again (ms). */
  private readonly recheckMs: number;
  private readonly retries: number;
  private readonly signals: Signals;
  private readonly installer: MapInstall<Client>;
  /** The router's copy of the records, and what routing makes of it. */
  private readonly view: RouterView<Client>;
  /** Give-backs of stopped moves' fences and completions of decided switches. */
  private readonly repairs: RouterRepairs<Client>;
  /** The waits of calls for shards between owners. */
  private readonly waits: RouterWaits<Client>;
  private reading: Promise<void> | undefined;
  /** The read after the one under way, shared by the callers of `refresh` meanwhile. */
  private nextReading: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The refresh the timer started, until it has ended. */
  private ticking: Promise<void> | undefined;
  private running = false;
  private readonly announcer: Announcer<Client>;

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
    const sweepMs = positive(options?.sweepIntervalMs, "sweepIntervalMs", 30_000);
    this.timeoutMs = positive(options?.timeoutMs, "timeoutMs", 5000);
    this.retries = positive(options?.retries, "retries", 20, true);
    const waitMs = positive(options?.waitMs, "waitMs", 5000);
    const lockTimeoutMs = positive(options?.lockTimeoutMs, "lockTimeoutMs", 200);
    if (options?.name !== undefined && (typeof options.name !== "string" || options.name === ""))
      issues.push("name: expected a non-empty string");
    if (issues.length > 0) throw new OwnershipOptionsError(issues);
    this.registry = options.registry;
    this.resolved = options.tables;
    this.signals = new Signals(options.onSignal);
    this.counters = this.signals.counters;
    this.name = options.name ?? `router ${hostname()}:${process.pid}`;
    this.announcer = new Announcer(this.registry, this.timeoutMs);
    this.changes = new OwnershipChanges<Client>(
      () => this.resolved,
      lockTimeoutMs,
      () => this.announce(),
    );
    this.installer = new MapInstall(this.registry, this, this.signals);
    this.repairs = new RouterRepairs(this, this.signals);
    this.view = new RouterView(
      this.registry,
      this.timeoutMs,
      sweepMs,
      this.installer,
      this.repairs,
      this.signals,
    );
    // A shard whose calls routing refuses is read again on a call at most once a second, however
    // long the interval: a database back from down serves again within a second of a call. A
    // database a call goes to is looked at beside the call as often at most (`RouterView.glance`).
    this.recheckMs = Math.min(this.refreshIntervalMs, 1000);
    this.waits = new RouterWaits(this.registry, this.view, this.repairs, () => this.refresh(), {
      waitMs,
      recheckMs: this.recheckMs,
    });
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
   * the open fails with that error. An ordinary start costs one statement per database, 16 databases
   * at a time: it tells what the database is and holds (schema, tables, functions) and reads its
   * records, which make the map's first read when every database answered and every shard was
   * recorded (else the records are read again after the install). Service instances may open
   * their maps at the same moment: the set-up is made once per database, by whichever comes first
   * (each database's install and recording run under an advisory lock of its own; the others, once
   * it is given, find the work done), and a function already installed as this version has it is
   * left alone (no DDL at all). Once its
   * databases have answered, the install and recording wait at most 30 s for them, or `timeoutMs` when longer:
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

  /** The open's install (see `open` and `MapInstall.open`): each database tells what it is and holds. */
  private async install(): Promise<void> {
    this.resolved = await this.installer.open(this.view.identities, this.resolved);
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
      this.reading = unbounded(() => this.view.read()).finally(() => {
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

  /** The timer's check: a read under way (a refresh) covers it; else one, which later refreshes wait for. */
  private check(): Promise<void> {
    this.reading ??= unbounded(() => this.view.check()).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  /**
   * The shards whose calls routing refuses now, and why: records that cannot be right (each
   * problem), or a database that has not answered the map's read yet.
   */
  problemsOf(): { shard: ShardIdentifier; issues: string[] }[] {
    return [...this.view.problems].map(([bits, problem]) => ({
      shard: ShardIdentifier.fromBits(bits),
      issues:
        problem.kind === "records"
          ? problem.issues
          : [`${problem.database.name} has not answered the map's read (${problem.error})`],
    }));
  }

  /** The databases whose latest read failed, and why. */
  unanswered(): Map<Database<Client>, string> {
    return new Map(this.view.silent);
  }

  /** Whether `physical` may hold records of `shard`: it was never read, or its last records name it. */
  mayRecord(physical: Database<Client>, shard: ShardIdentifier): boolean {
    const rows = this.view.rows.get(physical);
    return rows === undefined || rows.some((r) => r.shard === shard.bits);
  }

  /** Each shard: where routing sends it now, its epoch and state. */
  entries(): MapEntry[] {
    return this.registry.shards.map((shard) => {
      const physical = this.registry.databaseOf(shard);
      const row = this.view.rowOf(physical, shard);
      return {
        shard,
        database: physical.name,
        epoch: this.registry.epochOf(shard),
        state: (row?.state ?? "owned") as OwnershipState,
      };
    });
  }

  /**
   * Checks the map every `refreshIntervalMs` until `stop()`: one small statement per database (the
   * digest of its records), and a full read only of a database whose records changed or hold a
   * shard in motion (see `RouterView.check`). A failed check is retried at the next tick.
   */
  start(): void {
    if (this.running) return;
    this.running = true;
    const tick = () => {
      this.timer = setTimeout(() => {
        this.ticking = this.check()
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
   * Announces a change of records to every router (see `Announcer`): made after every change this
   * map's changes commit, without holding up the changer; `moveShard` waits for its last one.
   */
  announce(): Promise<void> {
    return this.announcer.announce();
  }

  /** Stops refreshing and announcing, and detaches the map from routing. */
  close(): void {
    this.announcer.close();
    void this.stop();
    this.registry.attachOwnership(undefined);
  }

  /** What a database says it is (`server:port/database`); throws when it has not answered yet. */
  identityOf(physical: Database<Client>): string {
    const id = this.view.identities.get(physical);
    if (!id)
      throw new OwnershipOptionsError([`${physical.name} has not answered yet: its identity is unknown`]);
    return id;
  }

  /** Counts a change of owner refused because someone else changed the shard first, and returns its error. */
  conflict(shard: ShardIdentifier, message: string): EpochConflictError {
    this.signals.emit({ type: "conflict", shard, message });
    return new EpochConflictError(shard, message);
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
        this.signals.emit({ type: "stale_rejection", refusal });
        return { shard: refusal.shard, refusal };
      },
      refresh: async (rejected, attempt) => {
        this.signals.emit({ type: "retry", shard: rejected.shard, attempt });
        const refusal = (rejected as { refusal?: Refusal }).refusal;
        await this.waits.settle(refusal ?? { shard: rejected.shard, epoch: 0, state: "unknown", peer: null });
      },
      admit: (shard, call) => {
        // A switch this router missed the announcement of changed the records of the database the
        // call goes to (its former owner): looked at beside the call, at most once per `recheckMs`.
        this.view.glance(this.registry.databaseOf(shard), this.recheckMs, () => this.refresh());
        return this.waits.admit(shard, call);
      },
      begin: (tx, shard) => this.assertOwner(tx, shard),
      confirm: (client, shard) => this.assertOwner(client, shard),
      giveUp: (error) => new StaleOwnerError(refusalOf(error)!, { cause: error }),
    };
  }
}
