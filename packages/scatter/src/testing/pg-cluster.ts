// Test helper: the second PostgreSQL server ("shardb" on 127.0.0.1:5433) that fault tests stop and
// start, managed by the workspace's shared test-db tooling (idempotent, locked per cluster).
import { ensureCluster, withClusterStopped } from "@shardkit/test-db";

export const SHARDB_PORT = 5433;
const CLUSTER = "shardb";

/** Makes sure the shardb cluster exists (trust auth, 127.0.0.1 only) and is running. */
export async function ensureShardb(): Promise<void> {
  await ensureCluster(CLUSTER, SHARDB_PORT);
}

/** Stops shardb, runs `fn` while it is down, then starts it again (even when `fn` throws). */
export function withShardbStopped<T>(fn: () => Promise<T>): Promise<T> {
  return withClusterStopped(CLUSTER, SHARDB_PORT, fn);
}
