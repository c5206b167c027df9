import { readFileSync } from "node:fs";
import { shardsOfRun, testCluster } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";

/**
 * The orders tests' second PostgreSQL server (stopped by the shard-down tests): a cluster of
 * the project's own, named after its package (`SHARDKIT_TEST_CLUSTER=<name>:<port>` picks another),
 * made by the global setup and dropped after the last test run using it.
 */
export const SECOND = testCluster(
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).name,
);

declare module "vitest" {
  export interface ProvidedContext {
    /** SHARDKIT_SHARDS JSON: four shards in two groups on three databases, one on a second server. */
    shardsJson: string;
    /** Why the tests that stop the second server are skipped; "" when they run. */
    secondSkipped: string;
  }
}

/** The run's shard databases, made before the tests and dropped after them. */
export default async function setup(project: TestProject) {
  const run = await shardsOfRun("orders", SECOND);
  project.provide("shardsJson", run.shardsJson);
  project.provide("secondSkipped", run.skipped);
  return run.drop;
}
