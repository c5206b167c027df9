// Test helper: the second PostgreSQL server that fault tests stop and start: the test file's own
// (test-db's `ownCluster`: a cluster name and port of its own, shared with no other run), made
// before its tests and dropped after them, by the shared test-db tooling (locked per cluster).
import { ownCluster, withClusterStopped } from "@shardkit/test-db";

let server: Awaited<ReturnType<typeof ownCluster>> | undefined;

/** Makes this process's second server (trust auth, 127.0.0.1 only), running; resolves to its port. */
export async function startShardb(): Promise<number> {
  server ??= await ownCluster("skscatter");
  return server.port;
}

/** Drops the second server, its databases with it. */
export async function dropShardb(): Promise<void> {
  await server?.drop();
  server = undefined;
}

/** Stops the second server (made first if need be), runs `fn` while it is down, then starts it again (even when `fn` throws). */
export async function withShardbStopped<T>(fn: () => Promise<T>): Promise<T> {
  await startShardb();
  return withClusterStopped(server!.cluster, server!.port, fn);
}
