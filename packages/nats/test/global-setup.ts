import { PrismaPg } from "@prisma/adapter-pg";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT, undoable } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";
import { ensureMachineNats } from "./nats-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Two shard databases on the machine's PostgreSQL server for each test file that writes to them. */
    natsShardUrls: { sink: { a: string; b: string }; consume: { a: string; b: string } };
    /** The machine's NATS server with JetStream. */
    natsUrl: string;
  }
}

/**
 * Two shard databases (the example's schema, rolled out the way users do) and the machine's NATS
 * server. Each test makes its own stream and subjects, and deletes them. A setup that fails
 * part-way drops the databases it made (`undoable`).
 */
export default function setup(project: TestProject) {
  return undoable(async (step) => {
    await ensureCluster("main", MAIN_PORT);
    const natsUrl = await ensureMachineNats();
    const dbs = (["sink", "consume"] as const).flatMap((pair) =>
      (["a", "b"] as const).map((key) => ({
        pair,
        key,
        name: `sk_nats_${pair}_${key}_${process.pid}`,
        url: "",
      })),
    );
    for (const db of dbs)
      db.url = await step(createDatabase(MAIN_PORT, db.name), () => dropDatabase(MAIN_PORT, db.name));
    await rolloutSchema({
      schema: new URL("../examples/schema.prisma", import.meta.url).pathname,
      targets: dbs.map((db) => ({ name: db.name, adapter: new PrismaPg({ connectionString: db.url }) })),
      onProgress: () => {},
    });
    const urls = { sink: { a: "", b: "" }, consume: { a: "", b: "" } };
    for (const db of dbs) urls[db.pair][db.key] = db.url;
    project.provide("natsShardUrls", urls);
    project.provide("natsUrl", natsUrl);
  });
}
