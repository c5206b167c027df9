import { PrismaPg } from "@prisma/adapter-pg";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";

/** A second, independent PostgreSQL server for this package's tests (its own cluster and port). */
export const SECOND = { cluster: "skowner", port: 5437 };

declare module "vitest" {
  export interface ProvidedContext {
    /** a, b: two databases on the machine's server; e: a spare database on the second server. */
    ownershipUrls: { a: string; b: string; e: string };
  }
}

export default async function setup(project: TestProject) {
  await ensureCluster("main", MAIN_PORT);
  await ensureCluster(SECOND.cluster, SECOND.port);
  const dbs = [
    { key: "a" as const, port: MAIN_PORT, name: `sk_owner_a_${process.pid}` },
    { key: "b" as const, port: MAIN_PORT, name: `sk_owner_b_${process.pid}` },
    { key: "e" as const, port: SECOND.port, name: `sk_owner_e_${process.pid}` },
  ];
  const urls = { a: "", b: "", e: "" };
  for (const db of dbs) urls[db.key] = await createDatabase(db.port, db.name);
  await rolloutSchema({
    schema: new URL("./schema.prisma", import.meta.url).pathname,
    targets: dbs.map((db) => ({ name: db.name, adapter: new PrismaPg({ connectionString: urls[db.key] }) })),
    onProgress: () => {},
  });
  project.provide("ownershipUrls", urls);
  return async () => {
    for (const db of dbs) await dropDatabase(db.port, db.name);
  };
}
