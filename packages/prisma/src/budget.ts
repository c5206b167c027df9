import { ConnectionBudgetError, describeBudget, type ServerBudget } from "./errors.js";
import type { ShardClient, ShardRegistry } from "./registry.js";

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
  const servers = new Map<string, ServerBudget>();
  const unreachable: string[] = [];
  await Promise.all(
    registry.physical.map(async (p) => {
      if (p.pool === undefined) return;
      let row: { id: string; max: number; reserved: number };
      try {
        [row] = (await (p.client as unknown as Raw).$queryRawUnsafe<(typeof row)[]>(
          `SELECT (SELECT system_identifier::text FROM pg_control_system()) || ':' || inet_server_port()::text AS id,
                  current_setting('max_connections')::int AS max,
                  current_setting('superuser_reserved_connections')::int AS reserved`,
        )) as [typeof row];
      } catch {
        unreachable.push(p.name);
        return;
      }
      let server = servers.get(row.id);
      if (!server) {
        server = { server: row.id, maxConnections: row.max, reserved: row.reserved, pools: 0, databases: [] };
        servers.set(row.id, server);
      }
      server.pools += p.pool;
      server.databases.push({ name: p.name, pool: p.pool });
    }),
  );
  const list = [...servers.values()];
  const over = list.filter((s) => s.pools > s.maxConnections - s.reserved);
  if (over.length > 0) {
    if ((options.onExceeded ?? "error") === "error") throw new ConnectionBudgetError(over);
    for (const s of over)
      (options.logger ?? console).warn(`[shardkit] connection budget: ${describeBudget(s)}`);
  }
  return { ok: over.length === 0, servers: list, unreachable };
}
