import { readFileSync } from "node:fs";
import { shardsOfRunSetup, testCluster } from "@shardkit/test-db";

/**
 * What the wallet tests' second PostgreSQL server (stopped and frozen by the fault tests) is named
 * after: the project's package (`SHARDKIT_TEST_CLUSTER=<name>:<port>` names another). The server is
 * the run's own (`<name>_<pid>` on a free port, given to the tests as `inject("second")`), made by the
 * global setup and dropped after the run's last test: no other run uses it.
 */
const SECOND = testCluster(
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).name,
);

/** The run's shard databases, made before the tests and dropped after them. */
export default shardsOfRunSetup("wallet", SECOND);
