import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ownCluster, ownReplica, pgUrl, undoable } from "@shardkit/test-db";
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

/**
 * The primary and its replicas, and one database on the primary (which the replicas copy), with the
 * test schema. A setup that fails part-way drops what it made (`undoable`).
 */
export default function setup(project: TestProject) {
  return undoable(async (step) => {
    const primary = await step(ownCluster("skreplprimary"), (own) => own.drop());
    const replicas: Server[] = [];
    for (const base of ["skreplica1", "skreplica2"]) {
      const replica = await step(ownReplica(base, { primaryPort: primary.port }), (own) => own.drop());
      replicas.push({ cluster: replica.cluster, port: replica.port });
    }
    project.provide("replication", { primary: { cluster: primary.cluster, port: primary.port }, replicas });
    const name = `sk_prisma_replica_${process.pid}`;
    const url = await step(createDatabase(primary.port, name), () =>
      dropDatabase(primary.port, name).catch(() => {}),
    );
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
  });
}
