import { readFileSync } from "node:fs";
import {
  createDatabase,
  dropCluster,
  dropDatabase,
  ensureCluster,
  MAIN_PORT,
  shareClusters,
  testCluster,
} from "@shardkit/test-db";
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

export default async function setup(project: TestProject) {
  await ensureCluster("main", MAIN_PORT);
  // Where the tests may not make a server (helpers that refuse with CLUSTERS_UNAVAILABLE say why),
  // the tests that stop it are skipped and the third database lives on the main server.
  let release = async () => {};
  const secondSkipped = await shareClusters(SECOND.cluster, {
    make: () => ensureCluster(SECOND.cluster, SECOND.port).then(() => {}),
    drop: () => dropCluster(SECOND.cluster),
  }).then((r) => {
    release = r;
    return "";
  }, unavailable);
  if (secondSkipped)
    console.warn(`skipping the tests that stop a second PostgreSQL server: ${secondSkipped}`);
  const dbs = [
    { port: MAIN_PORT, name: `sk_orders_a_${process.pid}` },
    { port: MAIN_PORT, name: `sk_orders_b_${process.pid}` },
    { port: secondSkipped ? MAIN_PORT : SECOND.port, name: `sk_orders_c_${process.pid}` },
  ];
  const [a, b, c] = await Promise.all(dbs.map((db) => createDatabase(db.port, db.name)));
  project.provide(
    "shardsJson",
    JSON.stringify([
      { group: 0, member: 0, url: a },
      { group: 0, member: 1, url: a },
      { group: 1, member: 0, url: b },
      { group: 1, member: 1, url: c },
    ]),
  );
  project.provide("secondSkipped", secondSkipped);
  return async () => {
    for (const db of dbs) await dropDatabase(db.port, db.name);
    await release();
  };
}

function unavailable(err: unknown): string {
  if ((err as { code?: unknown } | null)?.code === "CLUSTERS_UNAVAILABLE") return (err as Error).message;
  throw err;
}
