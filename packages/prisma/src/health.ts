import { orAfter } from "./deadline.js";
import { RoutingOptionsError } from "./errors.js";
import type { Database, ShardClient, ShardRegistry } from "./registry.js";

/**
 * A database's state in a service that opened it with `openShards`:
 * - `ready`: it answered, passed the start-up checks and has the schema;
 * - `starting`: it did not answer at start; retried (capped backoff) until it does and its schema
 *   is rolled out; its shards' requests fail as unavailable meanwhile;
 * - `refused`: it answered late but failed a check (the same database as another entry, over the
 *   connection budget, a rollout error); it stays refused until the service restarts.
 */
export type DatabaseState = "ready" | "starting" | "refused";

/** One database of `OpenShards.databases()`. */
export interface DatabaseStatus {
  name: string;
  /** Its logical shards' keys (a read replica's: its database's). */
  shards: string[];
  /** For a read replica: the name of the database it copies. */
  replicaOf?: string;
  state: DatabaseState;
  /** When it entered this state. */
  since: Date;
  /** Why it is not ready (the last error), when it is not. */
  error?: string;
  /** Times it was asked so far (1 for a database that answered at start). */
  attempts: number;
}

/** A shard's health: its database's state, probed now. */
export interface ShardHealth {
  shard: string;
  database: string;
  /**
   * `up`: its database answered the probe; `slow`: it has not answered within `timeoutMs` (a
   * busy or frozen server: not known to be down); `down`: the probe failed (refused, an error);
   * `starting` / `refused`: the database is not ready (see `DatabaseState`), not probed.
   */
  state: "up" | "slow" | "down" | "starting" | "refused";
  /** The probe's round trip, when it answered. */
  latencyMs?: number;
  error?: string;
}

/**
 * A database's connections, from `pg_stat_activity` and the server's settings. Counts of other
 * roles' sessions by state need `pg_read_all_stats` (or a superuser): without it, their sessions
 * count in `total` and `server` but not in `active` or `idleInTransaction`.
 */
export interface DatabaseConnections {
  /** Sessions connected to this database now (every state). */
  total: number;
  /** Of them, running a statement now. */
  active: number;
  /** Of them, idle inside an open transaction (holding its locks and snapshot). */
  idleInTransaction: number;
  /** Client sessions on the whole server now (every database). */
  server: number;
  /** What the server accepts: `max_connections` less `superuser_reserved_connections`. */
  max: number;
}

/** One database's probe (`probeDatabase`, and each database of `shardHealth`'s report). */
export interface DatabaseHealth {
  database: string;
  /** As `ShardHealth.state`: `up`, `slow` (no answer within `timeoutMs`), `down`, or not ready. */
  state: ShardHealth["state"];
  latencyMs?: number;
  error?: string;
  /** With `connections: true`, when it answered. */
  connections?: DatabaseConnections;
}

export interface HealthReport {
  /** `ok`: every shard up; `down`: none up or slow (each failed or not ready); `degraded`: the rest. */
  status: "ok" | "degraded" | "down";
  shards: ShardHealth[];
  /** Each database's probe, in the registry's order. */
  databases: DatabaseHealth[];
}

export interface ProbeOptions {
  /** How long the probe may take. Default 1000 ms. */
  timeoutMs?: number;
  /**
   * Also count the database's connections (`DatabaseConnections`: one read of `pg_stat_activity`
   * instead of `SELECT 1`). Default false.
   */
  connections?: boolean;
}

export interface ShardHealthOptions extends ProbeOptions {
  /** A database's state when it is not ready (from `openShards`); ready databases are probed. */
  stateOf?: (physical: Database<ShardClient>) => DatabaseStatus | undefined;
}

type Raw = { $queryRawUnsafe<T>(sql: string): Promise<T> };

const PLAIN_PROBE = "SELECT 1";
const CONNECTIONS_PROBE = `SELECT
  count(*) FILTER (WHERE datname = current_database())::int AS total,
  count(*) FILTER (WHERE datname = current_database() AND state = 'active')::int AS active,
  count(*) FILTER (WHERE datname = current_database() AND state LIKE 'idle in transaction%')::int AS "idleInTransaction",
  count(*) FILTER (WHERE backend_type = 'client backend')::int AS server,
  (current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int) AS max
FROM pg_stat_activity`;

/**
 * Probes still running, per client and question: a database that hangs gets one probe of each kind
 * at a time, not one per call (later calls wait on it rather than taking another connection).
 */
const running = new WeakMap<object, Map<string, Promise<unknown>>>();

function oneProbe(client: object, sql: string): Promise<unknown> {
  const mine = running.get(client) ?? new Map<string, Promise<unknown>>();
  running.set(client, mine);
  let probe = mine.get(sql);
  if (!probe) {
    probe = (client as Raw).$queryRawUnsafe(sql).finally(() => mine.delete(sql));
    mine.set(sql, probe);
  }
  return probe;
}

const LATE = Symbol("late");

/**
 * Probes one database (`SELECT 1`, or with `connections` its `pg_stat_activity` counts), bounded by
 * `timeoutMs`: `up` with its round trip, `slow` when it has not answered in time (a busy or frozen
 * server: not known to be down), `down` with the error's summary when it failed. A probe still
 * running from an earlier call is waited on, never doubled. `shardHealth` probes each database so.
 */
export async function probeDatabase(
  physical: Database<ShardClient>,
  options: ProbeOptions = {},
): Promise<DatabaseHealth> {
  const timeoutMs = checkedTimeout("probeDatabase", options.timeoutMs);
  const started = performance.now();
  const sql = options.connections ? CONNECTIONS_PROBE : PLAIN_PROBE;
  try {
    const answer = await orAfter(timeoutMs, LATE, () => oneProbe(physical.client, sql));
    if (answer === LATE)
      return { database: physical.name, state: "slow", error: `did not answer within ${timeoutMs} ms` };
    const health: DatabaseHealth = {
      database: physical.name,
      state: "up",
      latencyMs: Math.round((performance.now() - started) * 10) / 10,
    };
    const row = options.connections ? (answer as DatabaseConnections[])[0] : undefined;
    if (row)
      health.connections = {
        total: row.total,
        active: row.active,
        idleInTransaction: row.idleInTransaction,
        server: row.server,
        max: row.max,
      };
    return health;
  } catch (error) {
    return { database: physical.name, state: "down", error: summary(error) };
  }
}

function checkedTimeout(name: string, given: number | undefined): number {
  const timeoutMs = given ?? 1000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RoutingOptionsError([`${name}: timeoutMs must be a positive number, got ${timeoutMs}`]);
  }
  return timeoutMs;
}

/**
 * Probes every database of the registry at once (`probeDatabase`: `SELECT 1`, or its connection
 * counts with `connections`, bounded by `timeoutMs`) and reports each database's and each logical
 * shard's state. A database that hangs keeps its one probe running, and later calls wait on that
 * probe rather than taking another connection.
 */
export async function shardHealth<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ShardHealthOptions = {},
): Promise<HealthReport> {
  const timeoutMs = checkedTimeout("shardHealth", options.timeoutMs);
  const databases = await Promise.all(
    registry.databases.map((physical): Promise<DatabaseHealth> => {
      const status = notReady(options, physical);
      if (!status) return probeDatabase(physical, { timeoutMs, connections: options.connections ?? false });
      const entry: DatabaseHealth = {
        database: physical.name,
        state: status.state as "starting" | "refused",
      };
      if (status.error !== undefined) entry.error = status.error;
      return Promise.resolve(entry);
    }),
  );
  const shards: ShardHealth[] = [];
  registry.databases.forEach((physical, i) => {
    const { state, latencyMs, error } = databases[i]!;
    for (const shard of physical.shards) {
      const entry: ShardHealth = { shard: shard.key, database: physical.name, state };
      if (latencyMs !== undefined) entry.latencyMs = latencyMs;
      if (error !== undefined) entry.error = error;
      shards.push(entry);
    }
  });
  const up = shards.filter((s) => s.state === "up").length;
  // A slow answer is not an absent one: only shards that failed or are not ready make it "down".
  const alive = up + shards.filter((s) => s.state === "slow").length;
  return { status: up === shards.length ? "ok" : alive === 0 ? "down" : "degraded", shards, databases };
}

function notReady(options: ShardHealthOptions, physical: Database<ShardClient>) {
  const status = options.stateOf?.(physical);
  return status && status.state !== "ready" ? status : undefined;
}

/**
 * An error in one line: the last line of its message (Prisma's says where it was called
 * first), or for a driver adapter's error what its cause says (`DatabaseDoesNotExist (db: x)`).
 */
export function summary(error: unknown): string {
  const cause = (error as { name?: unknown; cause?: Record<string, unknown> } | undefined)?.cause;
  if (
    (error as { name?: unknown })?.name === "DriverAdapterError" &&
    cause &&
    typeof cause.kind === "string"
  ) {
    const detail = Object.entries(cause)
      .filter(([key, value]) => key !== "kind" && value !== undefined)
      .map(([key, value]) => `${key}: ${String(value)}`)
      .join(", ");
    return `${cause.kind}${detail ? ` (${detail})` : ""}`.slice(0, 300);
  }
  const message = error instanceof Error ? error.message : String(error ?? "");
  const lines = message.split("\n").map((l) => l.trim());
  return (lines.filter((l) => l.length > 0).at(-1) ?? "failed").slice(0, 300);
}
