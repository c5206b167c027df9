import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createShardRegistry, type ShardRegistry, shardRouting } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { type FencedTable, PartitionMap } from "../src/index.js";
import type { PartitionMapOptions } from "../src/map.js";
import { PrismaClient } from "./generated/prisma/client.js";

export const S = {
  g0m0: ShardIdentifier.of(0, 0),
  g0m1: ShardIdentifier.of(0, 1),
  g1m0: ShardIdentifier.of(1, 0),
};

/** Every table holding shard rows, and how a row names its shard. */
export const TABLES: FencedTable[] = [
  { table: "Bucket", column: "id" },
  { table: "Confirmation", column: "id" },
  { table: "OutboxEvent", column: "id" },
  { table: "IdempotencyKey", column: "shard", kind: "bits" },
  { table: "ProcessedEvent", column: "shard", kind: "bits" },
];

export const models = { Bucket: { keys: ["id"] }, Confirmation: { keys: ["id", "bucketId"] } };

/** The routed client over a registry of the test schema's databases. */
export function routedClient(registry: ShardRegistry<PrismaClient>) {
  return registry.databases[0]!.client.$extends(shardRouting({ registry, models }));
}

export type Db = ReturnType<typeof routedClient>;

/** `n` buckets on `shard`, each with 3 confirmations, written through the routed client `db`: their IDs. */
export async function seedBuckets(db: Db, shard: ShardIdentifier, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = ShardedId.generate("Bucket", shard);
    await db.bucket.create({ data: { id, name: `B-${i}`, remaining: 100 } });
    for (let c = 0; c < 3; c++)
      await db.confirmation.create({
        data: { id: ShardedId.colocatedWith("Confirmation", id), bucketId: id, desk: "seed" },
      });
    ids.push(id);
  }
  return ids;
}

/**
 * A router over the test databases: shards 0/0 and 0/1 on a, 1/0 on b, and e a spare (no shard
 * yet), with clients of its own, as a separate process would have; `open` opens its partition map,
 * waiting for the databases the default 5 s scaled by the machine's load (`patient`).
 */
export function routerOver(urls: { a: string; b: string; e: string }) {
  const clients = {
    a: new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.a }) }),
    b: new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.b }) }),
    e: new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.e }) }),
  };
  const registry = createShardRegistry({
    shards: [
      { shard: S.g0m0, client: clients.a },
      { shard: S.g0m1, client: clients.a },
      { shard: S.g1m0, client: clients.b },
    ],
    databases: [
      { client: clients.a, name: "a" },
      { client: clients.b, name: "b" },
      { client: clients.e, name: "e" },
    ],
  });
  const databases = {
    a: registry.databases.find((p) => p.name === "a")!,
    b: registry.databases.find((p) => p.name === "b")!,
    e: registry.databases.find((p) => p.name === "e")!,
  };
  const open = (options: Partial<PartitionMapOptions<PrismaClient>> = {}) =>
    PartitionMap.open({ registry, tables: TABLES, timeoutMs: patient(5000), ...options });
  return { clients, registry, databases, db: routedClient(registry), open };
}
