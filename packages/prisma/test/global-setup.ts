import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";
import { rolloutSchema } from "../src/rollout.js";

/** A second, independent PostgreSQL server for this package's tests (its own cluster and port). */
export const SECOND = { cluster: "skprisma", port: 5434 };

declare module "vitest" {
  export interface ProvidedContext {
    shardUrls: { a: string; b: string; c: string };
  }
}

/**
 * Three physical databases for the tests: two on the machine's server, one on a second server.
 * The schema reaches them through rolloutSchema, the same path users take.
 */
export default async function setup(project: TestProject) {
  await ensureCluster("main", MAIN_PORT);
  await ensureCluster(SECOND.cluster, SECOND.port);
  const suffix = `${process.pid}`;
  const dbs = [
    { key: "a" as const, port: MAIN_PORT, name: `sk_prisma_a_${suffix}` },
    { key: "b" as const, port: MAIN_PORT, name: `sk_prisma_b_${suffix}` },
    { key: "c" as const, port: SECOND.port, name: `sk_prisma_c_${suffix}` },
  ];
  const urls = { a: "", b: "", c: "" };
  for (const db of dbs) urls[db.key] = await createDatabase(db.port, db.name);
  await rolloutSchema({
    schema: new URL("./schema.prisma", import.meta.url).pathname,
    targets: dbs.map((db) => ({ name: db.name, adapter: new PrismaPg({ connectionString: urls[db.key] }) })),
    onProgress: () => {},
  });
  project.provide("shardUrls", urls);
  return async () => {
    for (const db of dbs) await dropDatabase(db.port, db.name);
  };
}
