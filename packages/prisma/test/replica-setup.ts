import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ownCluster, ownReplica, pgUrl } from "@shardkit/test-db";
import type { TestProject } from "vitest/node";
import { rolloutSchema } from "../src/rollout.js";

type Server = { cluster: string; port: number };

declare module "vitest" {
  export interface ProvidedContext {
    /** One database on the primary, and the same database on each replica. */
    replicaUrls: { primary: string; replicas: string[]; name: string };
    /**
     * A primary server and two streaming replicas of it (`pg_basebackup -R`), for the read-replica
     * tests, which stop a replica: the run's own (`ownCluster`, `ownReplica`), shared with no other
     * run, made when the tests start and dropped when they end.
     */
    replication: { primary: Server; replicas: Server[] };
  }
}

/** The primary, then each replica, of the run's own; each pushed on `made` once made. */
async function replicationServers(made: { drop(): Promise<void> }[]) {
  const primary = await ownCluster("skreplprimary");
  made.push(primary);
  const replicas: Server[] = [];
  for (const base of ["skreplica1", "skreplica2"]) {
    const replica = await ownReplica(base, { primaryPort: primary.port });
    made.push(replica);
    replicas.push({ cluster: replica.cluster, port: replica.port });
  }
  return { primary: { cluster: primary.cluster, port: primary.port }, replicas };
}

export default async function setup(project: TestProject) {
  const made: { drop(): Promise<void> }[] = [];
  const release = async () => {
    for (const server of made.reverse()) await server.drop();
  };
  const { primary, replicas } = await replicationServers(made).catch(async (error: unknown) => {
    await release().catch(() => {});
    throw error;
  });
  project.provide("replication", { primary, replicas });
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
