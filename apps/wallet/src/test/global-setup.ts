import { readFileSync } from "node:fs";
import { shardsOfRunSetup, testCluster } from "@shardkit/test-db";

/**
 * The wallet tests' second PostgreSQL server (stopped and frozen by the fault tests): a cluster of
 * the project's own, named after its package (`SHARDKIT_TEST_CLUSTER=<name>:<port>` picks another),
 * made by the global setup and dropped after the last test run using it.
 */
export const SECOND = testCluster(
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).name,
);

/** The run's shard databases, made before the tests and dropped after them. */
export default shardsOfRunSetup("wallet", SECOND);
