import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";

/** The orders tests' second PostgreSQL server (stopped by the shard-down tests). */
export const SECOND = { cluster: "skorders", port: 5436 };

declare module "vitest" {
  export interface ProvidedContext {
    /** SHARDKIT_SHARDS JSON: four shards in two groups on three databases, one on a second server. */
    shardsJson: string;
  }
}

export default async function setup(project: TestProject) {
  await ensureCluster("main", MAIN_PORT);
  await ensureCluster(SECOND.cluster, SECOND.port);
  const dbs = [
    { port: MAIN_PORT, name: `sk_orders_a_${process.pid}` },
    { port: MAIN_PORT, name: `sk_orders_b_${process.pid}` },
    { port: SECOND.port, name: `sk_orders_c_${process.pid}` },
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
  return async () => {
    for (const db of dbs) await dropDatabase(db.port, db.name);
  };
}
