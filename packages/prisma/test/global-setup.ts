import { PrismaPg } from "@prisma/adapter-pg";
import {
  createDatabase,
  dropDatabase,
  ensureCluster,
  MAIN_PORT,
  ownCluster,
  undoable,
} from "@shardkit/test-db";
import type { TestProject } from "vitest/node";
import { rolloutSchema } from "../src/rollout.js";

declare module "vitest" {
  export interface ProvidedContext {
    shardUrls: { a: string; b: string; c: string };
    /**
     * A second, independent PostgreSQL server, which the tests stop and freeze: this run's own
     * (`ownCluster`), shared with no other run, made here and dropped after the last test.
     */
    second: { cluster: string; port: number };
  }
}

/**
 * Three physical databases for the tests: two on the machine's server, one on a second server.
 * The schema reaches them through rolloutSchema, the same path users take. A setup that fails
 * part-way drops what it made (`undoable`).
 */
export default function setup(project: TestProject) {
  return undoable(async (step) => {
    await ensureCluster("main", MAIN_PORT);
    const second = await step(ownCluster("skprisma"), (own) => own.drop());
    const suffix = `${process.pid}`;
    const dbs = [
      { key: "a" as const, port: MAIN_PORT, name: `sk_prisma_a_${suffix}` },
      { key: "b" as const, port: MAIN_PORT, name: `sk_prisma_b_${suffix}` },
      { key: "c" as const, port: second.port, name: `sk_prisma_c_${suffix}` },
    ];
    const urls = { a: "", b: "", c: "" };
    for (const db of dbs)
      urls[db.key] = await step(createDatabase(db.port, db.name), () => dropDatabase(db.port, db.name));
    await rolloutSchema({
      schema: new URL("./schema.prisma", import.meta.url).pathname,
      targets: dbs.map(({ key, name }) => ({ name, adapter: new PrismaPg({ connectionString: urls[key] }) })),
      onProgress: () => {},
    });
    project.provide("shardUrls", urls);
    project.provide("second", { cluster: second.cluster, port: second.port });
  });
}
