// One rollout at a time per database. Two services starting together on an empty database both roll
// the schema out: without a lock both engines compare the empty database with the schema and both
// create its tables (one fails). With it the second waits for the first, then compares again and
// finds the schema there.
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";

/**
 * The advisory lock a rollout holds on its database (a transaction-level lock, so it is released
 * when its connection ends, whatever happens to the process). Not Prisma's own migrate lock
 * (72707369), which the engine takes on a connection of its own while this one is held.
 */
export const ROLLOUT_LOCK_KEY = 5_318_001_041;

/**
 * Runs `fn` (a rollout on the database `adapter` connects to) while holding the database's rollout
 * lock on a connection of its own, waiting for any other rollout holding it. An embedded database
 * (PGlite) has a single connection and a single process: the lock is not taken there (a transaction
 * held open on its one connection would stall the engine's statements).
 */
export async function withRolloutLock<T>(
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: () => Promise<T>,
): Promise<T> {
  if (adapter.adapterName === "pglite-prisma-adapter") return fn();
  const connection = await adapter.connect();
  try {
    const tx = await connection.startTransaction();
    try {
      await tx.executeRaw({
        sql: `SELECT pg_advisory_xact_lock(${ROLLOUT_LOCK_KEY})`,
        args: [],
        argTypes: [],
      });
      return await fn();
    } finally {
      // An adapter whose transactions are not phantom expects its caller to send the ROLLBACK.
      if (!tx.options.usePhantomQuery) {
        await tx.executeRaw({ sql: "ROLLBACK", args: [], argTypes: [] }).catch(() => {});
      }
      await tx.rollback().catch(() => {});
    }
  } finally {
    await connection.dispose();
  }
}
