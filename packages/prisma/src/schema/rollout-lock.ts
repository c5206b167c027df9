// One rollout at a time per database. Two services starting together on an empty database both roll
// the schema out: without a lock both engines compare the empty database with the schema and both
// create its tables (one fails). With it the second waits for the first, then compares again and
// finds the schema there, or gives up after its deadline naming the rollout that holds the lock.
import type { SqlMigrationAwareDriverAdapterFactory, SqlQueryable } from "@prisma/driver-adapter-utils";
import { RolloutLockTimeoutError } from "../errors.js";

/**
 * The advisory lock a rollout holds on its database (a transaction-level lock, so it is released
 * when its connection ends, whatever happens to the process). Not Prisma's own migrate lock
 * (72707369), which the engine takes on a connection of its own while this one is held.
 */
export const ROLLOUT_LOCK_KEY = 5_318_001_041;

/** How long a rollout waits for another rollout of its database by default (`lockTimeoutMs`). */
export const DEFAULT_ROLLOUT_LOCK_TIMEOUT_MS = 120_000;

/** Who holds the rollout lock (as `pg_locks` and `pg_stat_activity` say): pid, application_name, and since when. */
const HOLDER = `SELECT a.pid::text AS pid, a.application_name AS app, a.client_addr::text AS addr,
  a.usename::text AS "user", to_char(a.xact_start, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS since,
  (extract(epoch FROM clock_timestamp() - a.xact_start) * 1000)::float8 AS "heldMs"
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::text::bigint = ${ROLLOUT_LOCK_KEY} >> 32 AND l.objid::text::bigint = ${ROLLOUT_LOCK_KEY} & 4294967295
  AND l.objsubid = 1`;

/**
 * Runs `fn` (a rollout on the database `adapter` connects to) while holding the database's rollout
 * lock on a connection of its own, waiting for any other rollout holding it up to `timeoutMs`
 * (default 120 s; PostgreSQL's `lock_timeout` for that one statement): then `RolloutLockTimeoutError`
 * naming the holder (pid, application_name, since when), and `fn` does not run. An embedded database
 * (PGlite) has a single connection and a single process: the lock is not taken there (a transaction
 * held open on its one connection would stall the engine's statements).
 */
export async function withRolloutLock<T>(
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: () => Promise<T>,
  timeoutMs: number = DEFAULT_ROLLOUT_LOCK_TIMEOUT_MS,
): Promise<T> {
  if (adapter.adapterName === "pglite-prisma-adapter") return fn();
  const connection = await adapter.connect();
  try {
    const tx = await connection.startTransaction();
    let waited = false;
    try {
      const run = (sql: string) => tx.executeRaw({ sql, args: [], argTypes: [] });
      await run(`SET LOCAL lock_timeout = ${Math.max(1, Math.ceil(timeoutMs))}`);
      await run(`SELECT pg_advisory_xact_lock(${ROLLOUT_LOCK_KEY})`).catch((error: unknown) => {
        if (!isLockTimeout(error)) throw error;
        waited = true;
      });
      if (!waited) {
        await run("SET LOCAL lock_timeout = 0");
        return await fn();
      }
    } finally {
      // An adapter whose transactions are not phantom expects its caller to send the ROLLBACK.
      if (!tx.options.usePhantomQuery) {
        await tx.executeRaw({ sql: "ROLLBACK", args: [], argTypes: [] }).catch(() => {});
      }
      await tx.rollback().catch(() => {});
    }
    throw new RolloutLockTimeoutError(timeoutMs, await holderOf(connection));
  } finally {
    await connection.dispose();
  }
}

/** PostgreSQL's answer to a statement that waited longer than `lock_timeout` (SQLSTATE 55P03). */
function isLockTimeout(error: unknown): boolean {
  for (
    let e = error as { cause?: unknown; code?: unknown; message?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  )
    if (e.code === "55P03" || (typeof e.message === "string" && e.message.includes("lock timeout")))
      return true;
  return false;
}

/** Who holds the rollout lock now, in words (or that it was let go meanwhile). */
async function holderOf(connection: SqlQueryable): Promise<string> {
  try {
    const result = await connection.queryRaw({ sql: HOLDER, args: [], argTypes: [] });
    const row = result.rows[0];
    if (!row) return "nobody holds it now (it was let go meanwhile)";
    const [pid, app, addr, user, since, heldMs] = row as (string | number | null)[];
    return `pid ${pid} (application_name ${JSON.stringify(app ?? "")}, user ${user}${addr ? `, from ${addr}` : ""}) holds it, in a transaction open since ${since} (${Math.round(Number(heldMs) / 1000)} s)`;
  } catch (error) {
    return `its holder could not be read (${error instanceof Error ? error.message : String(error)})`;
  }
}
