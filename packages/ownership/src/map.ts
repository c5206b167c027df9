import { ShardIdentifier } from "@shardkit/id";
import {
  databaseIdentities,
  type OwnershipHook,
  type PhysicalShard,
  type ShardClient,
  type ShardRegistry,
} from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import {
  EpochConflictError,
  InvalidMapError,
  OwnershipOptionsError,
  type Refusal,
  StaleOwnerError,
} from "./errors.js";
import { type OwnershipRow, type OwnershipState, placeShards } from "./placement.js";
import { refusalOf } from "./refusal.js";
import {
  FENCE_ARGUMENTS_SQL,
  FENCE_TRIGGERS,
  type FencedTable,
  FUNCTION_BODIES_SQL,
  FUNCTIONS,
  fenceArguments,
  fenceStatements,
  functionBody,
  INSTALL_LOCK,
  SHARD_LOCK,
  shardOfRowSql,
} from "./sql.js";
import { listedTableIssues, resolveTables } from "./tables.js";

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
}

export type OwnershipSignal =
  | { type: "stale_rejection"; refusal: Refusal }
  | { type: "refresh"; changed: ShardIdentifier[]; missing: string[] }
  | { type: "retry"; shard: ShardIdentifier; attempt: number }
  | { type: "conflict"; shard: ShardIdentifier; message: string };

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
  /** How long one read of the map waits for each database. Default 2000 ms. */
  timeoutMs?: number;
  /**
   * How many times one write runs again after refusals. After a refusal the router reads the map;
   * when it still sends the shard to the database that refused (the shard is between owners: fenced,
   * not switched yet), the write waits for the map to change, for at most `waitMs`, and runs again.
   * The waiting writes share one poll of the map (every 10 ms), so a fence costs the databases no
   * storm of refused retries. Default 20 (about 5 s in all with the default `waitMs`).
   */
  retries?: number;
  /** How long a refused write waits for its shard's owner to change before it runs again. Default 250 ms. */
  waitMs?: number;
  /**
   * How long a change of owner waits for each table's lock before it gives way to the writers in
   * its path and tries again (writers wait at most about this long behind a fence). Default 200 ms.
   */
  lockTimeoutMs?: number;
  /** Every counted event, as it happens. */
  onSignal?(signal: OwnershipSignal): void;
}

export type Raw = {
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $transaction<R>(fn: (tx: Raw) => Promise<R>, options?: object): Promise<R>;
};
type Row = OwnershipRow;

/** Serialises changes of ownership within one database (one key for every shardkit ownership change). */
const CHANGE_LOCK = "SELECT pg_advisory_xact_lock(7301)::text AS locked";
/** Serialises installing shardkit's functions and recording unrecorded shards within one database. */
const INSTALL = `SELECT pg_advisory_xact_lock(${INSTALL_LOCK})::text AS locked`;

/**
 * The partition map: which database owns each logical shard, at which epoch. It is kept in the
 * shard databases themselves: each one's `ShardOwnership` table holds its own record of the shards
 * it owns, is receiving or gave away, and each database enforces its record (its fence refuses
 * writes to shards it does not own). Routers read every database's record, keep the last copy of
 * a database that does not answer, and apply it to the registry; a write refused by a former owner
 * makes them read again and retry at the current one.
 *
 * Changes of owner are compare-and-set on the epoch: `fence`, `switch`, `enforce` (the caller moves
 * the rows in between, or `@shardkit/ownership`'s moves do).
 */
export class PartitionMap<Client extends ShardClient = ShardClient> {
  readonly registry: ShardRegistry<Client>;
  readonly counters: OwnershipCounters = { staleRejections: 0, refreshes: 0, retries: 0, conflicts: 0 };
  private resolved: readonly FencedTable[];
  private readonly refreshIntervalMs: number;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly waitMs: number;
  /** Refused writes waiting for their shard's placement to change (see `settle`). */
  private readonly waiting = new Set<{
    shard: ShardIdentifier;
    physical: PhysicalShard<Client>;
    epoch: number;
    wake(): void;
  }>();
  private polling = false;
  private readonly lockTimeoutMs: number;
  private readonly onSignal: ((signal: OwnershipSignal) => void) | undefined;
  /** The last rows read from each database (kept while it does not answer). */
  private readonly rows = new Map<PhysicalShard<Client>, Row[]>();
  private identities = new Map<PhysicalShard<Client>, string>();
  private reading: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running = false;

  private constructor(options: PartitionMapOptions<Client>) {
    const issues: string[] = [];
    if (!options?.registry || !Array.isArray(options.registry.physical)) issues.push("registry: required");
    issues.push(...listedTableIssues(options?.tables));
    const positive = (value: number | undefined, name: string, fallback: number, integer = false) => {
      if (value === undefined) return fallback;
      if (!(Number.isFinite(value) && value >= (integer ? 0 : 1)) || (integer && !Number.isInteger(value))) {
        issues.push(`${name}: expected ${integer ? "an integer >= 0" : "a number >= 1"}, got ${value}`);
      }
      return value;
    };
    this.refreshIntervalMs = positive(options?.refreshIntervalMs, "refreshIntervalMs", 1000);
    this.timeoutMs = positive(options?.timeoutMs, "timeoutMs", 2000);
    this.retries = positive(options?.retries, "retries", 20, true);
    this.waitMs = positive(options?.waitMs, "waitMs", 250);
    this.lockTimeoutMs = positive(options?.lockTimeoutMs, "lockTimeoutMs", 200);
    if (issues.length > 0) throw new OwnershipOptionsError(issues);
    this.registry = options.registry;
    this.resolved = options.tables;
    this.onSignal = options.onSignal;
  }

  /**
   * The tables holding shard rows (fenced, moved and cleaned up table by table): the ones the map
   * was opened with, then `@shardkit/prisma`'s own tables that the databases have.
   */
  get tables(): readonly FencedTable[] {
    return this.resolved;
  }

  /**
   * Opens the map over a registry: finds which of `@shardkit/prisma`'s tables the databases have
   * (and adds them to `tables`), installs the refusal function in every database that answers,
   * records the configured placement as epoch 1 for shards no database has a record of (only when
   * every database answers, so a shard that moved to a database that is down is never given a second
   * owner), reads the map, and attaches it to the registry's routing.
   *
   * Service instances may open their maps at the same moment: each database's install and recording
   * run under an advisory lock of their own, and a function already installed as this version has it
   * is left alone (no DDL at all on an ordinary start).
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
    const reachable = this.registry.physical.filter((p) => this.identities.has(p));
    const found = await resolveTables(reachable, this.resolved, { timeoutMs: this.timeoutMs });
    if (found.issues.length > 0) throw new OwnershipOptionsError(found.issues);
    this.resolved = found.tables;
    await Promise.all(reachable.map((p) => installFunctions(raw(p))));
    if (reachable.length < this.registry.physical.length) return;
    await this.recordUnrecorded();
  }

  /**
   * Records the configured placement of every shard no database has a record of, as owned at epoch
   * 1. Several openers at once record it once: each holds every database's install lock (taken in
   * the order of their identities, the same in every process, so two openers never wait on each
   * other in a circle) from the read of the records to its commit. A later opener reads the records
   * the first one wrote and records nothing. Nothing unrecorded (the usual start): no lock.
   */
  private async recordUnrecorded(): Promise<void> {
    const databases = [...this.registry.physical].sort((a, b) =>
      this.identityOf(a) < this.identityOf(b) ? -1 : 1,
    );
    const unrecorded = async (dbs: { physical: PhysicalShard<Client>; db: Raw }[]) => {
      const recorded = new Set<number>();
      for (const { db } of dbs) {
        for (const row of await db.$queryRawUnsafe<Row[]>(`SELECT shard FROM "ShardOwnership"`)) {
          recorded.add(row.shard);
        }
      }
      return dbs.flatMap(({ physical, db }) =>
        physical.shards.filter((s) => !recorded.has(s.bits)).map((shard) => ({ shard, db })),
      );
    };
    const plain = databases.map((physical) => ({ physical, db: raw(physical) }));
    if ((await unrecorded(plain)).length === 0) return;
    const holding = async (
      i: number,
      held: { physical: PhysicalShard<Client>; db: Raw }[],
    ): Promise<void> => {
      if (i === databases.length) {
        for (const { shard, db } of await unrecorded(held)) {
          await db.$executeRawUnsafe(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES ($1, 1, 'owned') ON CONFLICT (shard) DO NOTHING`,
            shard.bits,
          );
        }
        return;
      }
      const physical = databases[i]!;
      await raw(physical).$transaction(
        async (tx) => {
          await tx.$queryRawUnsafe(INSTALL);
          await holding(i + 1, [...held, { physical, db: tx }]);
        },
        { timeout: 30_000, maxWait: 10_000 },
      );
    };
    await holding(0, []);
  }

  /**
   * Reads every database's record and applies it to the registry. A database that does not answer
   * in time keeps its last record. One read at a time: concurrent callers share it. Throws
   * `InvalidMapError` (nothing applied) when the records cannot be right.
   */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<void> {
    const result = await scatter(
      this.registry.physical,
      (physical) =>
        raw(physical).$queryRawUnsafe<Row[]>(`SELECT shard, epoch, state, peer FROM "ShardOwnership"`),
      { policy: "partial", targetTimeoutMs: this.timeoutMs, key: (p) => p.name },
    );
    const fresh = new Map(this.rows);
    for (const outcome of result.outcomes) {
      if (outcome.status === "fulfilled") fresh.set(outcome.target, outcome.value);
    }
    const missing = result.missing.map((m) => m.target.name);
    if (this.identities.size < this.registry.physical.length) {
      for (const [p, id] of await databaseIdentities(this.registry, { timeoutMs: this.timeoutMs })) {
        this.identities.set(p, id);
      }
    }
    const plan = this.plan(fresh);
    for (const [p, rows] of fresh) this.rows.set(p, rows);
    const changed: ShardIdentifier[] = [];
    for (const { shard, physical, epoch } of plan) {
      if (this.registry.physicalOf(shard) === physical && this.registry.epochOf(shard) === epoch) continue;
      this.registry.assign(shard, physical, epoch);
      changed.push(shard);
    }
    this.counters.refreshes++;
    this.onSignal?.({ type: "refresh", changed, missing });
  }

  /** Where each shard goes by these records (`placeShards`); throws `InvalidMapError` listing every problem. */
  private plan(records: Map<PhysicalShard<Client>, Row[]>) {
    const { placements, issues } = placeShards(this.registry, records, this.identities);
    const plan: { shard: ShardIdentifier; physical: PhysicalShard<Client>; epoch: number }[] = [];
    for (const { shard, owner, epoch, issues: problems } of placements) {
      issues.push(...problems);
      if (problems.length > 0 || owner === null || epoch === null) continue;
      if (epoch < this.registry.epochOf(shard)) {
        issues.push(
          `shard ${shard.key}: epoch ${epoch} is behind epoch ${this.registry.epochOf(shard)} already seen`,
        );
        continue;
      }
      plan.push({ shard, physical: owner, epoch });
    }
    if (issues.length > 0) throw new InvalidMapError(issues);
    return plan;
  }

  /** Each shard: where routing sends it now, its epoch and state. */
  entries(): MapEntry[] {
    return this.registry.shards.map((shard) => {
      const physical = this.registry.physicalOf(shard);
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
        this.refresh()
          .catch(() => {})
          .finally(() => {
            if (this.running) tick();
          });
      }, this.refreshIntervalMs);
      this.timer.unref?.();
    };
    tick();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /**
   * Before a change of owner (a move does it first, while the shard's rows are copied): lists the
   * shard in its owner's fence while the owner still owns it, naming where it will go. Its writes
   * then read the record (a shared lock and one row read, for that shard's writes only), and the
   * fence that follows is one row update, with no DDL waiting for every writer of the tables.
   * `unfence` undoes it. `EpochConflictError` when the shard is not owned there at the epoch this
   * map knows, or is armed for another database.
   */
  async arm(shardRef: ShardIdentifier | string, to: PhysicalShard<Client>): Promise<void> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const owner = this.registry.physicalOf(shard);
    if (owner === to) throw new OwnershipOptionsError([`arm: ${to.name} already owns shard ${shard.key}`]);
    const epoch = this.registry.epochOf(shard);
    const peer = this.identityOf(to);
    await this.change(owner, async (tx) => {
      const updated = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET peer = $3, "updatedAt" = now()
         WHERE shard = $1 AND epoch = $2 AND state = 'owned' AND (peer IS NULL OR peer = $3)`,
        shard.bits,
        epoch,
        peer,
      );
      if (updated !== 1)
        throw this.conflict(
          shard,
          `not owned by ${owner.name} at epoch ${epoch}, or armed for another database`,
        );
    });
  }

  /**
   * Step 1 of a change of owner: the shard's owner stops taking writes for it. In one transaction on
   * the owner, its record goes from owned to fenced (same epoch, compare-and-set), behind the writers
   * already at work on the shard, and every later write to its rows is refused. A shard not armed
   * first is listed in its tables' fence before (each table waits for its writers then). Returns
   * the epoch. `EpochConflictError` when the shard is not owned there at the epoch
   * this map knows.
   */
  async fence(shardRef: ShardIdentifier | string): Promise<{ epoch: number; database: string }> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const owner = this.registry.physicalOf(shard);
    const epoch = this.registry.epochOf(shard);
    await this.change(
      owner,
      async (tx) => {
        // Writers of an armed shard hold this lock (shared) until they commit; new ones queue behind it.
        await tx.$queryRawUnsafe(
          `SELECT pg_advisory_xact_lock(${SHARD_LOCK}, $1)::text AS locked`,
          shard.bits,
        );
        const updated = await tx.$executeRawUnsafe(
          `UPDATE "ShardOwnership" SET state = 'fenced', "updatedAt" = now() WHERE shard = $1 AND epoch = $2 AND state = 'owned'`,
          shard.bits,
          epoch,
        );
        if (updated !== 1) throw this.conflict(shard, `not owned by ${owner.name} at epoch ${epoch}`);
      },
      { list: shard.bits },
    );
    await this.refresh();
    return { epoch, database: owner.name };
  }

  /**
   * Undoes a fence or an arming that no switch followed (a change of owner given up): the owner takes
   * writes for the shard again, unchecked.
   */
  async unfence(shardRef: ShardIdentifier | string): Promise<void> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const owner = this.registry.physicalOf(shard);
    await this.change(owner, async (tx) => {
      const updated = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, "updatedAt" = now()
         WHERE shard = $1 AND epoch = $2 AND (state = 'fenced' OR (state = 'owned' AND peer IS NOT NULL))`,
        shard.bits,
        this.registry.epochOf(shard),
      );
      if (updated !== 1) throw this.conflict(shard, `neither fenced nor armed at ${owner.name}`);
    });
    await this.refresh();
  }

  /**
   * Prepares `to` to receive the shard: it records the shard as incoming and fences it, so nothing
   * but the mover's own session (`asMover`) writes its rows there until the switch.
   */
  async receive(shardRef: ShardIdentifier | string, to: PhysicalShard<Client>): Promise<void> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const owner = this.registry.physicalOf(shard);
    if (owner === to)
      throw new OwnershipOptionsError([`receive: ${to.name} already owns shard ${shard.key}`]);
    const epoch = this.registry.epochOf(shard);
    await this.change(
      to,
      async (tx) => {
        const [row] = await tx.$queryRawUnsafe<Row[]>(
          `INSERT INTO "ShardOwnership" (shard, epoch, state, peer) VALUES ($1, $2, 'incoming', $3)
         ON CONFLICT (shard) DO UPDATE SET epoch = EXCLUDED.epoch, state = 'incoming', peer = EXCLUDED.peer, "updatedAt" = now()
           WHERE "ShardOwnership".state IN ('moved', 'incoming') AND "ShardOwnership".epoch <= EXCLUDED.epoch
         RETURNING shard, epoch, state, peer`,
          shard.bits,
          epoch,
          this.identityOf(owner),
        );
        if (!row)
          throw this.conflict(shard, `${to.name} holds a record of it that is not a tombstone or older`);
      },
      { list: shard.bits },
    );
    await this.refresh();
  }

  /**
   * Step 2: `to` becomes the owner at the next epoch, by compare-and-set: only if the shard is fenced
   * at its owner at the epoch this map knows (checked under that record's lock, held until `to` has
   * committed), and `to` has no newer record. From then on `to` takes its writes, and the former
   * owner keeps refusing them. Returns the new epoch.
   */
  async switch(shardRef: ShardIdentifier | string, to: PhysicalShard<Client>): Promise<{ epoch: number }> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const from = this.registry.physicalOf(shard);
    if (from === to) throw new OwnershipOptionsError([`switch: ${to.name} already owns shard ${shard.key}`]);
    const epoch = this.registry.epochOf(shard);
    const next = epoch + 1;
    await raw(from).$transaction(async (held) => {
      const [row] = await held.$queryRawUnsafe<Row[]>(
        `SELECT shard, epoch, state, peer FROM "ShardOwnership" WHERE shard = $1 FOR UPDATE`,
        shard.bits,
      );
      if (row?.state !== "fenced" || row.epoch !== epoch) {
        throw this.conflict(
          shard,
          `must be fenced at ${from.name} at epoch ${epoch} (it is ${row?.state ?? "unrecorded"} at epoch ${row?.epoch ?? 0})`,
        );
      }
      await this.change(
        to,
        async (tx) => {
          const [taken] = await tx.$queryRawUnsafe<Row[]>(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES ($1, $2, 'owned')
           ON CONFLICT (shard) DO UPDATE SET epoch = EXCLUDED.epoch, state = 'owned', peer = NULL, "updatedAt" = now()
             WHERE "ShardOwnership".state IN ('moved', 'incoming') AND "ShardOwnership".epoch < EXCLUDED.epoch
           RETURNING shard, epoch, state, peer`,
            shard.bits,
            next,
          );
          if (!taken)
            throw this.conflict(shard, `${to.name} already has a record of it at epoch ${next} or later`);
        },
        { relist: false },
      );
    });
    await this.refresh();
    return { epoch: next };
  }

  /**
   * Step 3: the former owner records where the shard went (a tombstone at the new epoch). Its fence
   * stays: a stale router or a script writing there is refused, told the new owner and epoch.
   * Idempotent: a tombstone already recorded is left as it is.
   */
  async enforce(shardRef: ShardIdentifier | string, from: PhysicalShard<Client>): Promise<void> {
    const shard = this.shard(shardRef);
    await this.refresh();
    const owner = this.registry.physicalOf(shard);
    if (owner === from)
      throw new OwnershipOptionsError([`enforce: ${from.name} still owns shard ${shard.key}`]);
    const epoch = this.registry.epochOf(shard);
    await this.change(from, async (tx) => {
      await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'moved', epoch = $2, peer = $3, "updatedAt" = now()
         WHERE shard = $1 AND state = 'fenced' AND epoch < $2`,
        shard.bits,
        epoch,
        this.identityOf(owner),
      );
    });
    await this.refresh();
  }

  /**
   * After `enforce`: deletes the former owner's old copy of the shard's rows, table by table in
   * batches of `batchSize` (default 1000), as the mover. Until then a read across shards that
   * reaches the former owner also sees the old copy. The tombstone and the fence stay. Returns the
   * rows deleted per table.
   */
  async cleanup(
    shardRef: ShardIdentifier | string,
    from: PhysicalShard<Client>,
    options: { batchSize?: number } = {},
  ): Promise<Record<string, number>> {
    const shard = this.shard(shardRef);
    const batchSize = options.batchSize ?? 1000;
    if (!(Number.isSafeInteger(batchSize) && batchSize >= 1)) {
      throw new OwnershipOptionsError([`cleanup: batchSize must be an integer >= 1, got ${batchSize}`]);
    }
    await this.refresh();
    const [row] = await raw(from).$queryRawUnsafe<Row[]>(
      `SELECT shard, epoch, state, peer FROM "ShardOwnership" WHERE shard = $1`,
      shard.bits,
    );
    if (row?.state !== "moved") {
      throw this.conflict(
        shard,
        `${from.name} holds no tombstone for it (${row?.state ?? "no record"}): its rows are not an old copy`,
      );
    }
    const deleted: Record<string, number> = {};
    for (const table of this.tables) {
      const bits = shardOfRowSql(table);
      deleted[table.table] = 0;
      for (;;) {
        const n = await this.asMover(from, (tx) =>
          tx.$executeRawUnsafe(
            `DELETE FROM "${table.table}" WHERE ctid IN (SELECT ctid FROM "${table.table}" WHERE ${bits} = $1 LIMIT ${batchSize})`,
            shard.bits,
          ),
        );
        deleted[table.table] = (deleted[table.table] ?? 0) + n;
        if (n < batchSize) break;
      }
    }
    return deleted;
  }

  /**
   * Brings `database`'s fence in line with its records. A switch leaves the target's fence in
   * place (it lets the shard's writes through once its record says owned); this removes it.
   */
  async tidy(database: PhysicalShard<Client>): Promise<void> {
    await this.relist(database);
  }

  /**
   * Undoes `receive` (a change of owner given up before its switch): deletes what `to` holds of
   * the shard, as the mover, and its incoming record, which lifts its fence for the shard.
   */
  async discard(shardRef: ShardIdentifier | string, to: PhysicalShard<Client>): Promise<void> {
    const shard = this.shard(shardRef);
    await this.refresh();
    if (this.registry.physicalOf(shard) === to) {
      throw new OwnershipOptionsError([
        `discard: ${to.name} owns shard ${shard.key}: its rows are not a copy`,
      ]);
    }
    await this.change(to, async (tx) => {
      await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
      for (const table of this.tables) {
        const bits = shardOfRowSql(table);
        await tx.$executeRawUnsafe(`DELETE FROM "${table.table}" WHERE ${bits} = $1`, shard.bits);
      }
      await tx.$executeRawUnsafe(
        `DELETE FROM "ShardOwnership" WHERE shard = $1 AND state = 'incoming'`,
        shard.bits,
      );
    });
    await this.refresh();
  }

  /**
   * Runs `fn` in a transaction on `database` as the mover: the fence lets its writes through (copying
   * a shard's rows in, deleting an old copy). Nothing else should use it.
   */
  asMover<R>(database: PhysicalShard<Client>, fn: (tx: Raw) => Promise<R>): Promise<R> {
    return raw(database).$transaction(async (tx) => {
      await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
      return fn(tx);
    });
  }

  /** Stops refreshing and detaches the map from routing. */
  close(): void {
    this.stop();
    this.registry.attachOwnership(undefined);
  }

  /**
   * A change of `database`'s records: `fn`, in one transaction under the database's change lock.
   *
   * The fence's list of shards is kept apart from the records, table by table, each table in a
   * transaction of its own (`relist`), so trigger DDL never holds one table while it waits for
   * another: no deadlock with a writer that holds that other table, and each table's writers wait
   * only for their own table. Listing a shard is always safe (its writes then check its record);
   * unlisting is safe only once its record says owned. So:
   * - `list`: a shard `fn` will make not owned (a fence, an incoming record). It is listed on every
   *   table first, and `fn` runs only if, under the change lock, every table still lists it
   *   (else listing runs again).
   * - after `fn` commits, the list is brought in line with the records (shards no longer needing a
   *   check are unlisted), unless `relist: false` (the switch: `tidy` does it later, outside the
   *   freeze).
   */
  private async change(
    database: PhysicalShard<Client>,
    fn: (tx: Raw) => Promise<void>,
    options: { list?: number; relist?: boolean } = {},
  ): Promise<void> {
    const { list } = options;
    try {
      for (let attempt = 1; ; attempt++) {
        if (list !== undefined) await this.relist(database, [list]);
        const done = await this.locked(database, async (tx) => {
          if (list !== undefined && !(await this.listedEverywhere(tx, list))) return false;
          await fn(tx);
          return true;
        });
        if (done) break;
        if (attempt >= 20)
          throw this.conflict(
            ShardIdentifier.fromBits(list!),
            `its listing in ${database.name}'s fence kept being undone by concurrent changes`,
          );
      }
    } catch (error) {
      if (list !== undefined) await this.relist(database).catch(() => {});
      throw error;
    }
    if (options.relist !== false) await this.relist(database);
  }

  /**
   * `fn` in a transaction on `database` holding its change lock, waiting at most `lockTimeoutMs`
   * for any lock: a transaction that waits longer gives way (rolls back, so the writers in its
   * path finish first) and runs again.
   */
  private async locked<R>(database: PhysicalShard<Client>, fn: (tx: Raw) => Promise<R>): Promise<R> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await raw(database).$transaction(
          async (tx) => {
            await tx.$queryRawUnsafe(CHANGE_LOCK);
            await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${this.lockTimeoutMs}ms'`);
            return fn(tx);
          },
          { timeout: 30_000, maxWait: 10_000 },
        );
      } catch (error) {
        if (attempt >= 50 || !gaveWay(error)) throw error;
        await new Promise((r) => setTimeout(r, Math.random() * 20 * Math.min(attempt, 10)));
      }
    }
  }

  /**
   * Brings each table's fence list in line with `database`'s records (the shards it does not simply
   * own: armed, fenced, moved away, incoming), plus `also`. One transaction per table; no DDL for a
   * table whose list is right already, so a change of state of a listed shard (fence, switch,
   * tombstone) is one row update while writes wait.
   */
  private async relist(database: PhysicalShard<Client>, also: readonly number[] = []): Promise<void> {
    const wantedIn = async (db: Raw) => {
      const records = await db.$queryRawUnsafe<{ shard: number }[]>(
        `SELECT shard FROM "ShardOwnership" WHERE state <> 'owned' OR peer IS NOT NULL`,
      );
      return [...new Set([...records.map((r) => r.shard), ...also])].sort((a, b) => a - b);
    };
    const inLine = (table: FencedTable, wanted: number[], present: { args: string[] } | undefined) =>
      wanted.length === 0
        ? present === undefined
        : present?.args.length === FENCE_TRIGGERS.length &&
          present.args.every((a) => a === fenceArguments(table, wanted));
    // The usual case, read without locks: every table is in line already (a listed shard changing
    // state). A change that races this one lists for itself.
    const [wanted, listings] = await Promise.all([wantedIn(raw(database)), this.listings(raw(database))]);
    for (const table of this.tables) {
      if (inLine(table, wanted, listings.get(table.table))) continue;
      await this.locked(database, async (tx) => {
        const now = await wantedIn(tx);
        if (inLine(table, now, (await this.listings(tx)).get(table.table))) return;
        for (const statement of fenceStatements(table, now)) await tx.$executeRawUnsafe(statement);
      });
    }
  }

  /** Whether every table's three fence triggers list `bits`. */
  private async listedEverywhere(tx: Raw, bits: number): Promise<boolean> {
    const listings = await this.listings(tx);
    return this.tables.every((table) => {
      const present = listings.get(table.table);
      return (
        present?.args.length === FENCE_TRIGGERS.length && present.shards.every((list) => list.includes(bits))
      );
    });
  }

  /** Each table's fence triggers: their arguments, and the shards each lists. */
  private async listings(tx: Raw) {
    const rows = await tx.$queryRawUnsafe<{ table: string; name: string; args: string }[]>(
      FENCE_ARGUMENTS_SQL,
      FENCE_TRIGGERS,
    );
    const byTable = new Map<string, { args: string[]; shards: number[][] }>();
    for (const row of rows) {
      const entry = byTable.get(row.table) ?? { args: [], shards: [] };
      entry.args.push(row.args);
      entry.shards.push((row.args.split("|")[2] ?? "").split(",").filter(Boolean).map(Number));
      byTable.set(row.table, entry);
    }
    return byTable;
  }

  /** What a database says it is (`server:port/database`); throws when it has not answered yet. */
  identityOf(physical: PhysicalShard<Client>): string {
    const id = this.identities.get(physical);
    if (!id)
      throw new OwnershipOptionsError([`${physical.name} has not answered yet: its identity is unknown`]);
    return id;
  }

  private shard(ref: ShardIdentifier | string): ShardIdentifier {
    const shard = ref instanceof ShardIdentifier ? ref : ShardIdentifier.parse(ref);
    return this.registry.resolve(shard);
  }

  private conflict(shard: ShardIdentifier, message: string): EpochConflictError {
    this.counters.conflicts++;
    this.onSignal?.({ type: "conflict", shard, message });
    return new EpochConflictError(shard, message);
  }

  /**
   * After a refusal of a write for `shard`: reads the map, and when routing would still send the
   * shard where it was refused (it is between owners), waits until its placement changes (owner or
   * epoch), or `waitMs`. Every waiting write shares one poll of the map.
   */
  private async settle(shard: ShardIdentifier): Promise<void> {
    const physical = this.registry.physicalOf(shard);
    const epoch = this.registry.epochOf(shard);
    await this.refresh();
    if (this.registry.physicalOf(shard) !== physical || this.registry.epochOf(shard) !== epoch) return;
    await new Promise<void>((resolve) => {
      const waiter = {
        shard,
        physical,
        epoch,
        wake: () => {
          clearTimeout(timer);
          this.waiting.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, this.waitMs);
      this.waiting.add(waiter);
      void this.poll();
    });
  }

  /** Re-reads the map every 10 ms while refused writes wait, and wakes those whose shard's placement changed. */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      while (this.waiting.size > 0) {
        await new Promise((r) => setTimeout(r, 10));
        await this.refresh().catch(() => {});
        for (const w of this.waiting) {
          if (
            this.registry.physicalOf(w.shard) !== w.physical ||
            this.registry.epochOf(w.shard) !== w.epoch
          ) {
            w.wake();
          }
        }
      }
    } finally {
      this.polling = false;
    }
  }

  /** What routing calls on a refusal (see `OwnershipHook`). */
  private hook(): OwnershipHook {
    return {
      retries: this.retries,
      rejection: (error) => {
        const refusal = refusalOf(error);
        if (!refusal) return undefined;
        this.counters.staleRejections++;
        this.onSignal?.({ type: "stale_rejection", refusal });
        return { shard: refusal.shard };
      },
      refresh: async (rejected, attempt) => {
        this.counters.retries++;
        this.onSignal?.({ type: "retry", shard: rejected.shard, attempt });
        await this.settle(rejected.shard);
      },
      begin: async (tx, shard) => {
        const epoch = this.registry.epochOf(shard);
        if (epoch === 0) return; // no record of the shard yet (a database was down at open): nothing to assert
        await (tx as Raw).$queryRawUnsafe(
          "SELECT shardkit_assert_owner($1, $2)::text AS epoch",
          shard.bits,
          epoch,
        );
      },
      giveUp: (error) => new StaleOwnerError(refusalOf(error)!, { cause: error }),
    };
  }
}

export function raw<Client extends ShardClient>(physical: PhysicalShard<Client>): Raw {
  return physical.client as unknown as Raw;
}

/**
 * Installs shardkit's functions in one database, each only when the database does not hold it as
 * this version has it. Replacing a function is an update of its catalog row, which two sessions
 * cannot do at once (PostgreSQL raises "tuple concurrently updated"): installers queue on the
 * database's install lock, and each checks again once it holds it, so the ones after the first
 * find the functions in place and change nothing.
 */
async function installFunctions(db: Raw): Promise<void> {
  const stale = async (reader: Raw) => {
    const rows = await reader.$queryRawUnsafe<{ name: string; body: string }[]>(
      FUNCTION_BODIES_SQL,
      FUNCTIONS.map((f) => f.name),
    );
    return FUNCTIONS.filter((f) => !rows.some((r) => r.name === f.name && r.body === functionBody(f.create)));
  };
  if ((await stale(db)).length === 0) return;
  await db.$transaction(
    async (tx) => {
      await tx.$queryRawUnsafe(INSTALL);
      for (const f of await stale(tx)) await tx.$executeRawUnsafe(f.create);
    },
    { timeout: 30_000, maxWait: 10_000 },
  );
}

/** A change that gave way: it waited too long for a lock (55P03) or lost a deadlock (40P01). */
function gaveWay(error: unknown): boolean {
  const text = `${(error as { code?: unknown })?.code ?? ""} ${(error as Error)?.message ?? ""} ${JSON.stringify((error as { meta?: unknown })?.meta ?? {})}`;
  return /55P03|40P01|lock timeout|deadlock detected/.test(text);
}
