// The PostgreSQL clusters of this package's tests. The logical pair is made by the global setup and
// dropped when the last run using it ends; a server a test stops or freezes is its file's own.
import { ownCluster, patient } from "@shardkit/test-db";
import { afterAll, beforeAll } from "vitest";

/** Two servers with wal_level = logical, for a live move: its source and its target. */
export const LIVE = {
  source: { cluster: "skclisrc", port: 5451 },
  target: { cluster: "skclidst", port: 5452 },
};

/**
 * A plain server of the test file's own (test-db's `ownCluster`: a name and port no other run uses),
 * for a test that stops or freezes it: made before the file's tests (its name and port are set from
 * then on) and dropped after them. Call it before the file's `testDatabases`.
 */
export function fileServer(base: string): { cluster: string; port: number } {
  const server = { cluster: "", port: 0 };
  let drop = async () => {};
  beforeAll(async () => {
    const own = await ownCluster(base);
    Object.assign(server, { cluster: own.cluster, port: own.port });
    drop = own.drop;
  }, patient(120_000));
  afterAll(() => drop());
  return server;
}
