import { PrismaPg } from "@prisma/adapter-pg";
import {
  createDatabase,
  createStreamingReplica,
  dropCluster,
  dropDatabase,
  ensureCluster,
  pgUrl,
  shareClusters,
} from "@shardkit/test-db";
import type { TestProject } from "vitest/node";
import { rolloutSchema } from "../src/rollout.js";

/**
 * A primary server and two streaming replicas of it (`pg_basebackup -R`), for the read-replica
 * tests: made when the tests start and dropped when they end (shared by test runs that overlap).
 */
export const REPLICATION = {
  primary: { cluster: "skreplprimary", port: 5441 },
  replicas: [
    { cluster: "skreplica1", port: 5442 },
    { cluster: "skreplica2", port: 5443 },
  ],
};

declare module "vitest" {
  export interface ProvidedContext {
    /** One database on the primary, and the same database on each replica. */
    replicaUrls: { primary: string; replicas: string[]; name: string };
  }
}

export default async function setup(project: TestProject) {
  const { primary, replicas } = REPLICATION;
  const drop = async () => {
    for (const r of replicas) await dropCluster(r.cluster);
    await dropCluster(primary.cluster);
  };
  const release = await shareClusters("prisma-replicas", {
    async make() {
      try {
        await ensureCluster(primary.cluster, primary.port);
        for (const r of replicas)
          await createStreamingReplica(r.cluster, r.port, { primaryPort: primary.port });
      } catch (error) {
        await drop().catch(() => {});
        throw error;
      }
    },
    drop,
  });
  const name = `sk_prisma_replica_${process.pid}`;
  try {
    const url = await createDatabase(primary.port, name);
    await rolloutSchema({
      schema: new URL("./schema.prisma", import.meta.url).pathname,
      targets: [{ name, adapter: new PrismaPg({ connectionString: url }) }],
      onProgress: () => {},
    });
    project.provide("replicaUrls", {
      primary: url,
      replicas: replicas.map((r) => pgUrl(r.port, name)),
      name,
    });
  } catch (error) {
    await release();
    throw error;
  }
  return async () => {
    await dropDatabase(primary.port, name).catch(() => {});
    await release();
  };
}
