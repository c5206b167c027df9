import { PrismaPg } from "@prisma/adapter-pg";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import {
  createDatabase,
  dropDatabase,
  ensureCluster,
  MAIN_PORT,
  ownCluster,
  shareCluster,
  undoable,
} from "@shardkit/test-db";
import type { TestProject } from "vitest/node";

/**
 * Two servers with wal_level = logical, for live moves: the source and the target. The benches use
 * both; the tests use the source (shared with any other run of them) and a target of the run's own
 * (`moveTarget`), which they freeze.
 */
export const LOGICAL = {
  source: { cluster: "skmovesrc", port: 5438 },
  target: { cluster: "skmovedst", port: 5439 },
};

declare module "vitest" {
  export interface ProvidedContext {
    /** a, b: two databases on the machine's server; e: a spare database on the second server. */
    ownershipUrls: { a: string; b: string; e: string };
    /** a, b: two databases on one logical-replication server; e: a spare on another. */
    moveUrls: { a: string; b: string; e: string };
    /**
     * The second server (`e`), which the tests stop, and the moves' target (`moveUrls.e`), which they
     * freeze: the run's own (`ownCluster`), shared with no other run, dropped after the last test.
     */
    second: { cluster: string; port: number };
    moveTarget: { cluster: string; port: number };
  }
}

/** The servers and databases of the run, with the test schema; a setup that fails part-way drops what it made. */
export default function setup(project: TestProject) {
  return undoable(async (step) => {
    await ensureCluster("main", MAIN_PORT);
    const second = await step(ownCluster("skowner"), (own) => own.drop());
    const target = await step(ownCluster("skmovedst", { logical: true }), (own) => own.drop());
    // The source exists for these tests only: shared with any other run of them on the machine, and
    // dropped by the last run to end.
    await step(shareCluster(LOGICAL.source.cluster, LOGICAL.source.port, { logical: true }), (release) =>
      release(),
    );
    const dbs = [
      { key: "a" as const, port: MAIN_PORT, name: `sk_owner_a_${process.pid}` },
      { key: "b" as const, port: MAIN_PORT, name: `sk_owner_b_${process.pid}` },
      { key: "e" as const, port: second.port, name: `sk_owner_e_${process.pid}` },
    ];
    const moving = [
      { key: "a" as const, port: LOGICAL.source.port, name: `sk_move_a_${process.pid}` },
      { key: "b" as const, port: LOGICAL.source.port, name: `sk_move_b_${process.pid}` },
      { key: "e" as const, port: target.port, name: `sk_move_e_${process.pid}` },
    ];
    const urls = { a: "", b: "", e: "" };
    const moveUrls = { a: "", b: "", e: "" };
    const made = (db: { port: number; name: string }) =>
      step(createDatabase(db.port, db.name), () => dropDatabase(db.port, db.name));
    for (const db of dbs) urls[db.key] = await made(db);
    for (const db of moving) moveUrls[db.key] = await made(db);
    await rolloutSchema({
      schema: new URL("./schema.prisma", import.meta.url).pathname,
      targets: [
        ...dbs.map((db) => ({ name: db.name, adapter: new PrismaPg({ connectionString: urls[db.key] }) })),
        ...moving.map((db) => ({
          name: db.name,
          adapter: new PrismaPg({ connectionString: moveUrls[db.key] }),
        })),
      ],
      onProgress: () => {},
    });
    project.provide("ownershipUrls", urls);
    project.provide("moveUrls", moveUrls);
    project.provide("second", { cluster: second.cluster, port: second.port });
    project.provide("moveTarget", { cluster: target.cluster, port: target.port });
  });
}
