import { ConnectionBudgetError, describeBudget, RegistryConfigError, type ServerBudget } from "./errors.js";
import type { PhysicalShard, ShardClient, ShardRegistry } from "./registry.js";

/** Connections each database's pool may open when the config does not say (node-postgres' own default). */
export const DEFAULT_POOL_SIZE = 10;

export interface ConnectionBudgetOptions {
  /** `'error'` (default): throw `ConnectionBudgetError`; `'warn'`: log each server over budget. */
  onExceeded?: "error" | "warn";
  logger?: { warn(message: string): void };
}

export interface ConnectionBudgetReport {
  ok: boolean;
  /** Every server the registry's databases are on, with the pools that add up on it. */
  servers: ServerBudget[];
  /** Databases that did not answer (their server is not counted). */
  unreachable: string[];
}

type Raw = { $queryRawUnsafe<T>(sql: string): Promise<T> };

/** What one database says about itself: which server and database it is, and that server's limits. */
interface Inspected {
  /** The server's system identifier and port: two URL spellings of one server give the same. */
  server: string;
  database: string;
  max: number;
  reserved: number;
}

const INSPECT = `SELECT (SELECT system_identifier::text FROM pg_control_system()) || ':' || inet_server_port()::text AS server,
  current_database() AS database,
  current_setting('max_connections')::int AS max,
  current_setting('superuser_reserved_connections')::int AS reserved`;

/** Asks every database of the registry who it is; databases that do not answer are listed apart. */
async function inspect<Client extends ShardClient>(registry: ShardRegistry<Client>) {
  const answered: { physical: PhysicalShard<Client>; row: Inspected }[] = [];
  const unreachable: string[] = [];
  await Promise.all(
    registry.physical.map(async (physical) => {
      try {
        const [row] = await (physical.client as unknown as Raw).$queryRawUnsafe<Inspected[]>(INSPECT);
        answered.push({ physical, row: row! });
      } catch {
        unreachable.push(physical.name);
      }
    }),
  );
  answered.sort((x, y) => x.physical.index - y.physical.index);
  return { answered, unreachable };
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
  const inspection = await inspect(registry);
  distinct(inspection);
  return { unreachable: inspection.unreachable };
}

/**
 * Both checks of a registry at start-up (`openShards`), from one question to each database:
 * `checkDistinctDatabases`, then `checkConnectionBudget`.
 */
export async function checkDatabases<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ConnectionBudgetOptions = {},
): Promise<ConnectionBudgetReport> {
  const inspection = await inspect(registry);
  distinct(inspection);
  return budget(inspection, options);
}

type Inspection<Client> = Awaited<ReturnType<typeof inspect<Client & ShardClient>>>;

function distinct<Client extends ShardClient>({ answered }: Inspection<Client>): void {
  const seen = new Map<string, PhysicalShard<Client>>();
  const issues: string[] = [];
  for (const { physical, row } of answered) {
    const identity = `${row.server}/${row.database}`;
    const first = seen.get(identity);
    if (first) {
      issues.push(
        `${physical.name} (shards ${physical.shards.map((s) => s.key).join(", ")}) is the same database as ${first.name} (shards ${first.shards.map((s) => s.key).join(", ")}): database ${row.database} on server ${row.server}. List each database once, under one URL`,
      );
    } else seen.set(identity, physical);
  }
  if (issues.length > 0) throw new RegistryConfigError(issues);
}

/**
 * Adds up the pool sizes of the registry's databases per PostgreSQL server (told apart by the
 * server's own system identifier, so two URL spellings of one server count once) and compares
 * each sum with what the server accepts: `max_connections` less `superuser_reserved_connections`.
 * Databases whose pool size the registry does not know (built from clients, or embedded) are not
 * counted. One process is counted: N instances of a service open N times as many.
 */
export async function checkConnectionBudget<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ConnectionBudgetOptions = {},
): Promise<ConnectionBudgetReport> {
  return budget(await inspect(registry), options);
}

function budget<Client extends ShardClient>(
  { answered, unreachable }: Inspection<Client>,
  options: ConnectionBudgetOptions,
): ConnectionBudgetReport {
  const servers = new Map<string, ServerBudget>();
  for (const { physical, row } of answered) {
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
  const over = list.filter((s) => s.pools > s.maxConnections - s.reserved);
  if (over.length > 0) {
    if ((options.onExceeded ?? "error") === "error") throw new ConnectionBudgetError(over);
    for (const s of over)
      (options.logger ?? console).warn(`[shardkit] connection budget: ${describeBudget(s)}`);
  }
  return { ok: over.length === 0, servers: list, unreachable };
}
