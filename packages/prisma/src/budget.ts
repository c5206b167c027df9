import { scatter } from "@shardkit/scatter";
import { ConnectionBudgetError, describeBudget, RegistryConfigError, type ServerBudget } from "./errors.js";
import type { Database, ShardClient, ShardRegistry, ShardReplica } from "./registry.js";
import { pooledRaw } from "./shared-pool.js";

/** Connections each database's pool may open when the config does not say (node-postgres' own default). */
export const DEFAULT_POOL_SIZE = 10;

export interface ConnectionBudgetOptions {
  /** `'error'` (default): throw `ConnectionBudgetError`; `'warn'`: log each server over budget. */
  onExceeded?: "error" | "warn";
  logger?: { warn(message: string): void };
}

export interface ConnectionBudgetReport {
  ok: boolean;
  /** Every server the registry's databases (and their read replicas) are on, with the pools that add up on it. */
  servers: ServerBudget[];
  /** Databases and replicas that did not answer (their server is not counted). */
  unreachable: string[];
}

type Raw = { $queryRawUnsafe<T>(sql: string): Promise<T> };

/** What one database says about itself: which server and database it is, and that server's limits. */
export interface Inspected {
  /** The server's system identifier and port: two URL spellings of one server give the same. */
  server: string;
  database: string;
  max: number;
  reserved: number;
  /** True on a standby (`pg_is_in_recovery()`): a read replica, not a database to write to. */
  standby: boolean;
  /** The server's `max_prepared_transactions`: 0 (the default) refuses atomic actions. */
  prepared: number;
}

/**
 * The SQL of a database's server: its system identifier and port (`Inspected.server`). The port the
 * session reached, or the server's own where there is none (a Unix socket, embedded PGlite): every
 * server has a port, so two servers never share the identity `null`.
 */
const SERVER_SQL = `(SELECT system_identifier::text FROM pg_control_system()) || ':' || coalesce(inet_server_port()::text, current_setting('port'))`;

/** The columns of a query that say who a database is (`server`, `database`): see `identityOf`. */
export const IDENTITY_COLUMNS = `${SERVER_SQL} AS server, current_database() AS database`;

/** What a database says it is (`server:port/database`) from its `IDENTITY_COLUMNS`, as `databaseIdentities` gives it. */
export function identityOf(row: { server: string | null; database: string }): string {
  return `${row.server}/${row.database}`;
}

/** Who a database is and its limits: one row of `Inspected`. */
export const INSPECT = `SELECT ${IDENTITY_COLUMNS},
  current_setting('max_connections')::int AS max,
  current_setting('superuser_reserved_connections')::int AS reserved,
  pg_is_in_recovery() AS standby,
  current_setting('max_prepared_transactions')::int AS prepared`;

/**
 * What `inspect` learnt: the databases that answered, and the ones that did not with why; and, for
 * the connection budget, the read replicas that answered (their pools count on their own servers).
 */
/** Databases asked who they are at once. */
const INSPECT_CONCURRENCY = 16;

export interface Inspection<Client, Target = Database<Client>> {
  answered: { physical: Target; row: Inspected }[];
  unreachable: { physical: Target; error: unknown }[];
  replicas?: Inspection<Client, ShardReplica<Client>>["answered"];
}

/**
 * Asks each database who it is, `INSPECT_CONCURRENCY` at a time (a fleet's first connections are
 * opened in waves, not all at once against its servers); a database that fails or does not answer
 * within `timeoutMs` (default 5 s, from its own start) is listed apart with its error.
 */
export async function inspect<Client extends ShardClient, Target extends { client: Client; name: string }>(
  databases: readonly Target[],
  options: {
    timeoutMs?: number;
    /**
     * Runs the inspection's SQL on a database; default: through its client's shared pool (an
     * `openShards` client's: no engine started, see `pooledRaw`), else through its client.
     */
    query?: (physical: Target, sql: string) => Promise<Inspected>;
  } = {},
): Promise<Inspection<Client, Target>> {
  const query =
    options.query ??
    (async (physical, sql) =>
      (
        await ((pooledRaw(physical.client) ?? physical.client) as unknown as Raw).$queryRawUnsafe<
          Inspected[]
        >(sql)
      )[0]!);
  const result = await scatter(
    databases,
    async (physical) => ({ physical, row: await query(physical, INSPECT) }),
    {
      policy: "partial",
      key: (physical) => physical.name,
      targetTimeoutMs: options.timeoutMs ?? 5000,
      concurrency: INSPECT_CONCURRENCY,
      abortable: false,
    },
  );
  return {
    answered: result.values,
    unreachable: result.missing.map((m) => ({ physical: m.target, error: m.error })),
  };
}

/**
 * What each database of the registry says it is: `"<server system identifier>:<port>/<database>"`,
 * the same for every URL spelling of one database. Databases that do not answer within
 * `timeoutMs` (default 5 s) are missing from the map.
 */
export async function databaseIdentities<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: { timeoutMs?: number } = {},
): Promise<Map<Database<Client>, string>> {
  const { answered } = await inspect(registry.databases, { timeoutMs: options.timeoutMs ?? 5000 });
  return new Map(answered.map(({ physical, row }) => [physical, identityOf(row)]));
}

/**
 * Refuses a registry in which two entries are one database (two URL spellings of it, a
 * `postgres://` and a `postgresql://`, an added query parameter...): every scatter would read it
 * twice. Databases are told apart by what the server says (its system identifier, port and
 * database name), not by the URL text. Throws `RegistryConfigError` naming both; returns the
 * databases that did not answer (not checked).
 */
export async function checkDistinctDatabases<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
): Promise<{ unreachable: string[] }> {
  const inspection = await inspect(registry.databases);
  distinct(inspection.answered);
  return { unreachable: inspection.unreachable.map((u) => u.physical.name) };
}

/**
 * Both checks of a registry at start-up (`openShards`), from one question to each database:
 * `checkDistinctDatabases`, then `checkConnectionBudget`.
 */
export async function checkDatabases<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ConnectionBudgetOptions = {},
): Promise<ConnectionBudgetReport> {
  return judgeWithReplicas(registry, (inspection) => checkInspected(inspection, options));
}

/**
 * `judge`'s report over what `inspect` learns from the registry's databases and, at the same time,
 * from their read replicas: a replica that did not answer is unreachable too.
 */
async function judgeWithReplicas<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  judge: (inspection: Inspection<Client>) => ConnectionBudgetReport,
): Promise<ConnectionBudgetReport> {
  const [databases, replicas] = await Promise.all([
    inspect<Client, Database<Client>>(registry.databases),
    inspect<Client, ShardReplica<Client>>(registry.databases.flatMap((p) => p.replicas)),
  ]);
  const report = judge({ ...databases, replicas: replicas.answered });
  return {
    ...report,
    unreachable: [...report.unreachable, ...replicas.unreachable.map((u) => u.physical.name)],
  };
}

/**
 * Both checks over what `inspect` learnt. With `only`, a problem is reported only when it involves
 * that database (one that answered late, checked against the others).
 */
export function checkInspected<Client extends ShardClient>(
  inspection: Inspection<Client>,
  options: ConnectionBudgetOptions = {},
  only?: Database<Client>,
): ConnectionBudgetReport {
  distinct(inspection.answered, only);
  return budget(inspection, options, only);
}

function distinct<Client extends ShardClient>(
  answered: Inspection<Client>["answered"],
  only?: Database<Client>,
): void {
  const seen = new Map<string, Database<Client>>();
  const issues: string[] = [];
  for (const { physical, row } of answered) {
    const identity = `${row.server}/${row.database}`;
    const first = seen.get(identity);
    if (first && (only === undefined || only === physical || only === first)) {
      issues.push(
        `${physical.name} (shards ${physical.shards.map((s) => s.key).join(", ")}) is the same database as ${first.name} (shards ${first.shards.map((s) => s.key).join(", ")}): database ${row.database} on server ${row.server}. List each database once, under one URL`,
      );
    } else if (!first) seen.set(identity, physical);
  }
  if (issues.length > 0) throw new RegistryConfigError(issues);
}

/**
 * Adds up the pool sizes of the registry's databases per PostgreSQL server (told apart by the
 * server's own system identifier, so two URL spellings of one server count once) and compares
 * each sum with what the server accepts: `max_connections` less `superuser_reserved_connections`.
 * Databases whose pool size the registry does not know (built from clients, embedded, or reached
 * through a transaction-mode pooler: `pooler: true` in the config) are not counted. Read replicas' pools count on their own servers. One process is counted: N instances
 * of a service open N times as many.
 */
export async function checkConnectionBudget<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ConnectionBudgetOptions = {},
): Promise<ConnectionBudgetReport> {
  return judgeWithReplicas(registry, (inspection) => budget(inspection, options));
}

function budget<Client extends ShardClient>(
  { answered, unreachable, replicas = [] }: Inspection<Client>,
  options: ConnectionBudgetOptions,
  only?: Database<Client>,
): ConnectionBudgetReport {
  const servers = new Map<string, ServerBudget>();
  for (const { physical, row } of [...answered, ...replicas]) {
    if (physical.pool === undefined) continue;
    let server = servers.get(row.server);
    if (!server) {
      server = {
        server: row.server,
        maxConnections: row.max,
        reserved: row.reserved,
        pools: 0,
        databases: [],
      };
      servers.set(row.server, server);
    }
    server.pools += physical.pool;
    server.databases.push({ name: physical.name, pool: physical.pool });
  }
  const list = [...servers.values()];
  const onlyServer = only && answered.find((a) => a.physical === only)?.row.server;
  const over = list.filter(
    (s) => s.pools > s.maxConnections - s.reserved && (only === undefined || s.server === onlyServer),
  );
  if (over.length > 0) {
    if ((options.onExceeded ?? "error") === "error") throw new ConnectionBudgetError(over);
    for (const s of over)
      (options.logger ?? console).warn(`[shardkit] connection budget: ${describeBudget(s)}`);
  }
  return { ok: over.length === 0, servers: list, unreachable: unreachable.map((u) => u.physical.name) };
}
