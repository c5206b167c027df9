import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { ShardIdentifier } from "@shardkit/id";
import { checkInspected, INSPECT, type Inspected, type Inspection, inspect } from "./budget.js";
import { redactUrl, shardRegistryFromEnv } from "./config.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, RegistryConfigError } from "./errors.js";
import { DatabaseGate } from "./gate.js";
import {
  type DatabaseState,
  type DatabaseStatus,
  type HealthReport,
  shardHealth,
  summary,
} from "./health.js";
import {
  createShardRegistry,
  type Database,
  type ShardClient,
  type ShardRegistry,
  type ShardReplica,
} from "./registry.js";
import { type RolloutEvent, type RolloutTarget, rolloutSchema } from "./schema-rollout.js";
import { isShardUnavailable } from "./unavailable.js";
import { prismaVersionWarning } from "./versions.js";

export interface OpenShardsOptions<Client extends ShardClient> {
  /** The Prisma schema (file or folder) every database gets, pushed at open. */
  schema: string;
  /**
   * Builds the client of one database from its driver adapter: `(adapter) => new PrismaClient({ adapter })`.
   * Called for each read replica too, with `database.replicaOf` naming the database it copies.
   */
  createClient(
    adapter: SqlMigrationAwareDriverAdapterFactory,
    database: { name: string; replicaOf?: string },
  ): Client;
  /**
   * The shards as JSON in the `SHARDKIT_SHARDS` format (`[{ group, member, url, replicas? }]` or
   * `{ shards, databases?, defaultShard?, unknownShard? }`): real PostgreSQL through `@prisma/adapter-pg`.
   * When absent (undefined), `embedded` is used; set but blank is an error, never a fallback.
   * Read replicas (`replicas: [url]`) get no schema (they copy their database's): each opens once
   * it is a standby of its database that has replayed the database's schema; until then, and
   * whenever it is down, its reads go to the database itself.
   */
  shardsJson?: string | undefined;
  /** Embedded PGlite: one database per shard under `dataDir` (needs `@electric-sql/pglite` and `pglite-prisma-adapter`). */
  embedded?: { dataDir: string; shards: readonly ShardIdentifier[] };
  /**
   * What an open does when the pools (`pool` per entry of `shardsJson`, default 10) of the
   * databases on one server add up to more than its `max_connections` allows: `'error'` (default)
   * throws `ConnectionBudgetError` naming the server and every pool; `'warn'` logs it.
   */
  connectionBudget?: "error" | "warn";
  /**
   * How long the open waits for each database's first answer (ms). A database that does not answer
   * in time, or is down, does not stop the open: it is `starting` (see `databases()`), its shards'
   * calls fail as unavailable, and it is retried until it answers, passes the checks and has the
   * schema. Default 5000.
   */
  connectTimeoutMs?: number;
  /** Backoff between the retries of a `starting` database (doubling, capped). Default 500 ms to 10 s. */
  retry?: { baseMs?: number; maxMs?: number };
  /**
   * Where the lines for people go (`schema 2/4 shard 0/1: applied`, `shards 1/1 on b: starting, ...`,
   * a version warning) when `onProgress`, `onState` or `onWarning` is not given. Default: stderr.
   */
  log?: (line: string) => void;
  /** Schema rollout progress. Default: one line per database (`log`). */
  onProgress?: (event: RolloutEvent) => void;
  /** A database changed state or, while starting, failed again with another error. Default: a line (`log`). */
  onState?: (status: DatabaseStatus) => void;
  /**
   * What is worth a warning at start-up: the app's `prisma`, `@prisma/client` and
   * `@prisma/adapter-pg` not on one version (`prismaVersionWarning`). Default: a line (`log`).
   */
  onWarning?: (message: string) => void;
}

export interface OpenShards<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Where the data lives, for people: the embedded folder or the (password-less) URLs. */
  describe: string;
  /** Each database's state now (`ready`, `starting`, `refused`), in registry order. */
  databases(): DatabaseStatus[];
  /**
   * Resolves once every database is ready; rejects with the check's error when one is refused.
   * Never settles while a database stays down: race it with a deadline where that matters.
   */
  ready: Promise<void>;
  /** Each shard's health now: ready databases are probed (`SELECT 1`, bounded), the others give their state. */
  health(options?: { timeoutMs?: number }): Promise<HealthReport>;
  /** Stops retrying databases, disconnects every client (and closes embedded databases). */
  close(): Promise<void>;
}

/**
 * One way to start a sharded service: embedded PGlite shards for development and demos, real
 * PostgreSQL by configuration, with the schema rolled out to every database it can reach before
 * the registry is returned. Only the configuration changes between the two; the code that uses the
 * registry does not.
 *
 * A database that is down at start does not stop the service (PostgreSQL only): its client is held
 * shut (every statement fails as unreachable, so its shards answer 503 while the others work), it is
 * retried with backoff, and when it answers it gets the same checks and the schema before it opens.
 * Configuration errors still fail the open: a database listed twice, a connection budget that
 * cannot hold, a database that answers with an error (no such database, authentication), a
 * rollout that fails on a database that answered.
 */
export async function openShards<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
): Promise<OpenShards<Client>> {
  const warning = prismaVersionWarning();
  if (warning) (options.onWarning ?? logOf(options))(warning);
  if (options.shardsJson !== undefined) return openPostgres(options, options.shardsJson);
  return openEmbedded(options);
}

interface Opening {
  physical: Database<ShardClient>;
  gate: DatabaseGate;
  target: RolloutTarget;
  status: DatabaseStatus;
}

/** A read replica of a database: held shut (its reads go to the database) until it is checked and caught up. */
interface Replica {
  replica: ShardReplica<ShardClient>;
  of: Opening;
  gate: DatabaseGate;
  /** Its own one-connection adapter, for the checks (never the schema). */
  target: RolloutTarget;
  status: DatabaseStatus;
}

async function openPostgres<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
  shardsJson: string,
): Promise<OpenShards<Client>> {
  const onProgress = options.onProgress ?? progressLine(logOf(options));
  const onState = options.onState ?? stateLine(logOf(options));
  const timeoutMs = positive(options.connectTimeoutMs, 5000, "connectTimeoutMs");
  const baseMs = positive(options.retry?.baseMs, 500, "retry.baseMs");
  const maxMs = Math.max(baseMs, positive(options.retry?.maxMs, 10_000, "retry.maxMs"));
  const budgetOptions = { onExceeded: options.connectionBudget ?? "error" } as const;
  const { PrismaPg } = await import("@prisma/adapter-pg");
  const made = new Map<ShardClient, { gate: DatabaseGate; target: RolloutTarget }>();
  const registry = shardRegistryFromEnv({
    env: { SHARDKIT_SHARDS: shardsJson },
    createClient: (url, shards, { pool, replicaOf }) => {
      const name = redactUrl(url);
      const gate = new DatabaseGate(name);
      const client = options.createClient(
        gate.wrap(new PrismaPg({ connectionString: url, max: pool })),
        replicaOf === undefined ? { name } : { name, replicaOf: redactUrl(replicaOf) },
      );
      const target = { name, adapter: new PrismaPg({ connectionString: url, max: 1 }), shards };
      made.set(client, { gate, target });
      return client;
    },
  });
  const databases: Opening[] = registry.databases.map((physical) => ({
    physical,
    ...made.get(physical.client)!,
    status: {
      name: physical.name,
      shards: physical.shards.map((s) => s.key),
      state: "starting",
      since: new Date(),
      attempts: 1,
    },
  }));
  const replicas: Replica[] = databases.flatMap((of) =>
    of.physical.replicas.map((replica) => ({
      replica,
      of,
      ...made.get(replica.client)!,
      status: {
        name: replica.name,
        shards: of.status.shards,
        replicaOf: of.physical.name,
        state: "starting" as const,
        since: new Date(),
        attempts: 1,
      },
    })),
  );
  const stop = new AbortController();
  const set = (db: { status: DatabaseStatus }, state: DatabaseState, error?: unknown) => {
    const message = error === undefined ? undefined : summary(error);
    const changed = db.status.state !== state || db.status.error !== message;
    db.status = {
      ...db.status,
      state,
      since: db.status.state === state ? db.status.since : new Date(),
      ...(message === undefined ? {} : { error: message }),
    };
    if (message === undefined) delete db.status.error;
    if (changed) onState({ ...db.status });
  };
  /** The databases that answered so far, with what they said: a late one is checked against them. */
  const known: Inspection<ShardClient>["answered"] = [];
  /** Asks a database (or replica) past its gate, through a connection of its own, within `timeoutMs`: the first row. */
  const ask = <Row = Inspected>(on: { target: RolloutTarget }, sql: string): Promise<Row> =>
    withDeadline(
      timeoutMs,
      () => new DatabaseTimeoutError(on.target.name, on.target.shards ?? [], timeoutMs),
      async () => {
        const connection = await on.target.adapter.connect();
        try {
          const result = await connection.queryRaw({ sql, args: [], argTypes: [] });
          return Object.fromEntries(result.columnNames.map((c, i) => [c, result.rows[0]![i]])) as Row;
        } finally {
          await connection.dispose();
        }
      },
    );
  /** Asks a database who it is. */
  const query = (physical: Database<ShardClient>, sql: string) =>
    ask(databases.find((d) => d.physical === physical)!, sql);
  /** Asks a replica who it is. */
  const queryReplica = (replica: ShardReplica<ShardClient>, sql: string) =>
    ask(replicas.find((r) => r.replica === replica)!, sql);
  /** Why a replica that answered `row` is not a read replica of its database (`of` answered `primary`). */
  const notAReplica = (rep: Replica, row: Inspected, primary: Inspected | undefined): string | undefined => {
    if (!row.standby) {
      return `${rep.status.name} is listed as a replica of ${rep.of.physical.name} but is not a standby (pg_is_in_recovery() is false): a replica must be a streaming copy of its database`;
    }
    const system = (r: Inspected) => r.server.slice(0, r.server.lastIndexOf(":"));
    if (primary && (system(row) !== system(primary) || row.database !== primary.database)) {
      return `${rep.status.name} is not a streaming replica of ${rep.of.physical.name}: it is database ${row.database} of system ${system(row)}, the database is ${primary.database} of system ${system(primary)}`;
    }
    return undefined;
  };
  const rollout = (db: Opening, index: number, total: number) =>
    rolloutSchema({
      schema: options.schema,
      targets: [db.target],
      onProgress: (event) => onProgress({ ...event, index, total }),
    });

  try {
    const [first, firstReplicas] = await Promise.all([
      inspect(
        databases.map((d) => d.physical),
        { timeoutMs, query },
      ),
      inspect(
        replicas.map((r) => r.replica),
        { timeoutMs, query: queryReplica },
      ),
    ]);
    const issues = [
      ...first.unreachable.filter((u) => !unreachable(u.error)),
      ...firstReplicas.unreachable.filter((u) => !unreachable(u.error) && !behind(u.error)),
    ].map((u) => `${u.physical.name}: ${summary(u.error)}`);
    for (const { physical, row } of first.answered) {
      if (row.standby) {
        issues.push(
          `${physical.name} is a standby (pg_is_in_recovery() is true): a database takes writes; list a standby under its database's replicas`,
        );
      }
    }
    for (const { physical, row } of firstReplicas.answered) {
      const rep = replicas.find((r) => r.replica === physical)!;
      const why = notAReplica(rep, row, first.answered.find((a) => a.physical === rep.of.physical)?.row);
      if (why) issues.push(why);
    }
    if (issues.length > 0) throw new RegistryConfigError(issues);
    // Before any schema change: one database listed twice, or a budget that cannot hold, is a
    // configuration error. Replicas' pools count on their own servers.
    checkInspected(
      { answered: first.answered, unreachable: [], replicas: firstReplicas.answered },
      budgetOptions,
    );
    known.push(...first.answered);
    const reachable = databases.filter((d) => first.answered.some((a) => a.physical === d.physical));
    for (const [index, db] of reachable.entries()) {
      try {
        await rollout(db, index, reachable.length);
      } catch (error) {
        if (!unreachable(error)) throw error; // the first failure stops the rollout, as rolloutSchema's does
        set(db, "starting", error);
        continue;
      }
      db.gate.open();
      db.status = { ...db.status, state: "ready", since: new Date() };
    }
    for (const u of first.unreachable)
      set(databases.find((d) => d.physical === u.physical)!, "starting", u.error);
  } catch (error) {
    await registry.disconnect();
    throw error;
  }

  /** Retries a database that was not ready at open until it is, or is refused. */
  async function recover(db: Opening): Promise<void> {
    let delay = baseMs;
    while (!stop.signal.aborted) {
      if (!(await pause(delay, stop.signal))) return;
      delay = Math.min(delay * 2, maxMs);
      db.status.attempts++;
      if (!known.some((k) => k.physical === db.physical)) {
        const asked = await inspect([db.physical], { timeoutMs, query });
        if (asked.answered.length === 0) {
          const error = asked.unreachable[0]!.error;
          if (!unreachable(error)) return set(db, "refused", error);
          set(db, "starting", error);
          continue;
        }
        try {
          checkInspected(
            { answered: [...known, ...asked.answered], unreachable: [] },
            budgetOptions,
            db.physical,
          );
        } catch (error) {
          return set(db, "refused", error);
        }
        known.push(...asked.answered);
      }
      try {
        await abortable(rollout(db, 0, 1), stop.signal);
      } catch (error) {
        if (stop.signal.aborted) return;
        if (unreachable(error)) {
          set(db, "starting", error);
          continue;
        }
        return set(db, "refused", error);
      }
      db.gate.open();
      set(db, "ready");
      return;
    }
  }

  /**
   * Opens a replica once its database is ready and it has replayed the database's WAL up to the
   * position the database was at then (so it has the schema); retried with backoff while it is down
   * or behind. Its reads go to the database until then. A replica that answers as something else
   * than a standby of its database is refused (and stays shut).
   */
  async function openReplica(rep: Replica): Promise<void> {
    let delay = baseMs;
    let lsn: string | undefined;
    for (;;) {
      if (rep.of.status.state === "refused")
        return set(rep, "refused", `${rep.of.physical.name} was refused`);
      if (rep.of.status.state === "ready") {
        try {
          lsn ??= (await ask<{ lsn: string }>(rep.of, "SELECT pg_current_wal_lsn()::text AS lsn")).lsn;
          if (!/^[0-9A-F]+\/[0-9A-F]+$/i.test(lsn))
            throw new RegistryConfigError([`unexpected WAL position ${lsn}`]);
          const row = await ask<Inspected & { caught: boolean }>(
            rep,
            `${INSPECT}, coalesce(pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn, false) AS caught`,
          );
          const primary = known.find((k) => k.physical === rep.of.physical)?.row;
          const why = notAReplica(rep, row, primary);
          if (why) return set(rep, "refused", new RegistryConfigError([why]));
          if (row.caught) {
            rep.gate.open();
            return set(rep, "ready");
          }
          set(rep, "starting", `replaying ${rep.of.physical.name}'s WAL up to ${lsn}`);
        } catch (error) {
          if (!unreachable(error) && !behind(error)) return set(rep, "refused", error);
          set(rep, "starting", error);
        }
      }
      if (!(await pause(delay, stop.signal))) return;
      delay = Math.min(delay * 2, maxMs);
      rep.status.attempts++;
    }
  }

  const waiting = databases.filter((d) => d.status.state === "starting");
  const loops = waiting.map((db) => recover(db));
  const replicaLoops = replicas.map((rep) => openReplica(rep));
  const everything = [...databases, ...replicas];
  const ready = Promise.all([...loops, ...replicaLoops]).then(() => {
    if (stop.signal.aborted && everything.some((d) => d.status.state !== "ready"))
      return new Promise<void>(() => {});
    const refused = everything.find((d) => d.status.state === "refused");
    if (refused) throw new RegistryConfigError([`${refused.status.name}: ${refused.status.error}`]);
  });
  ready.catch(() => {}); // a refusal is also reported through onState: nobody has to await `ready`
  return {
    registry,
    describe: databases.map((d) => d.target.name).join(", "),
    databases: () => everything.map((d) => ({ ...d.status })),
    ready,
    health: (health) =>
      shardHealth(registry, {
        ...health,
        stateOf: (physical) => databases.find((d) => d.physical === physical)?.status,
      }),
    async close() {
      stop.abort();
      await Promise.all([...loops, ...replicaLoops]);
      await registry.disconnect();
    },
  };
}

/**
 * A package embedded shards need, imported: one that is not installed is a `RegistryConfigError`
 * naming what to install, or to give PostgreSQL databases instead.
 */
export async function embeddedPackage<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ERR_MODULE_NOT_FOUND") throw error;
    throw new RegistryConfigError(
      [
        `embedded (PGlite) shards need ${name}, which is not installed: install @electric-sql/pglite and pglite-prisma-adapter (npm install @electric-sql/pglite pglite-prisma-adapter), or give PostgreSQL databases (shardsJson; SHARDKIT_SHARDS in the templates)`,
      ],
      { cause: error },
    );
  }
}

async function openEmbedded<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
): Promise<OpenShards<Client>> {
  if (!options.embedded) {
    throw new RegistryConfigError(["openShards: no shardsJson and no embedded configuration"]);
  }
  const onProgress = options.onProgress ?? progressLine(logOf(options));
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([
    embeddedPackage(() => import("@electric-sql/pglite"), "@electric-sql/pglite"),
    embeddedPackage(() => import("pglite-prisma-adapter"), "pglite-prisma-adapter"),
  ]);
  const { dataDir } = options.embedded;
  mkdirSync(dataDir, { recursive: true });
  const databases = options.embedded.shards.map((shard) => ({
    shard,
    pglite: new PGlite(join(dataDir, `shard-${shard.group}-${shard.member}`)),
  }));
  await rolloutSchema({
    schema: options.schema,
    targets: databases.map(({ shard, pglite }) => ({
      name: `shard ${shard.key}`,
      adapter: new PrismaPGlite(pglite),
      shards: [shard],
    })),
    onProgress,
  });
  const registry = createShardRegistry({
    shards: databases.map(({ shard, pglite }) => ({
      shard,
      client: options.createClient(new PrismaPGlite(pglite), { name: `shard ${shard.key}` }),
    })),
  });
  const since = new Date();
  return {
    registry,
    describe: `embedded PGlite, one database per shard, under ${dataDir}`,
    databases: () =>
      registry.databases.map((p) => ({
        name: p.name,
        shards: p.shards.map((s) => s.key),
        state: "ready",
        since,
        attempts: 1,
      })),
    ready: Promise.resolve(),
    health: (health) => shardHealth(registry, health ?? {}),
    async close() {
      await registry.disconnect();
      for (const { pglite } of databases) await pglite.close();
    },
  };
}

/** Down, unreachable, not answering in time: what waiting may cure (unlike a missing database or a refused login). */
function unreachable(error: unknown): boolean {
  if (isShardUnavailable(error)) return true;
  const message = String((error as Error | undefined)?.message ?? "");
  return /timed out after|Can't reach database server|ECONNREFUSED|Connection terminated|the database system is (starting up|shutting down)/i.test(
    message,
  );
}

/** A replica that has not replayed its database's creation yet (a new database): behind, not misconfigured. */
function behind(error: unknown): boolean {
  const cause = (error as { cause?: { kind?: unknown } } | undefined)?.cause;
  return (
    cause?.kind === "DatabaseDoesNotExist" ||
    /database "[^"]*" does not exist/.test(String((error as Error | undefined)?.message ?? ""))
  );
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(Number.isFinite(value) && value > 0)) {
    throw new RegistryConfigError([`openShards: ${name} must be a positive number, got ${value}`]);
  }
  return value;
}

/** Waits `ms`; false when `signal` aborted first. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** `promise`, or a rejection as soon as `signal` aborts (the work itself goes on, unobserved). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {});
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Where `openShards`' lines go: `options.log`, or stderr. */
function logOf(options: { log?: ((line: string) => void) | undefined }): (line: string) => void {
  return options.log ?? ((line) => process.stderr.write(`${line}\n`));
}

/** A database's state as a line for people. */
const stateLine =
  (log: (line: string) => void) =>
  (status: DatabaseStatus): void => {
    const detail = status.error ? ` (${status.error})` : "";
    if (status.replicaOf !== undefined) {
      const next =
        status.state === "ready" ? "ready" : `${status.state}; its reads go to ${status.replicaOf} meanwhile`;
      log(`replica ${status.name} of ${status.replicaOf}: ${next}${detail}`);
    } else {
      const next =
        status.state === "starting"
          ? ": starting, not answering yet; its shards answer 503 until it does"
          : `: ${status.state}`;
      log(`shards ${status.shards.join(", ")} on ${status.name}${next}${detail}`);
    }
  };

/** A database's schema rollout, once done, as a line for people. */
const progressLine =
  (log: (line: string) => void) =>
  (event: RolloutEvent): void => {
    if (event.type === "done")
      log(`schema ${event.index + 1}/${event.total} ${event.target}: ${event.report.status}`);
  };
