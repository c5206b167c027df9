import { PGlite } from "@electric-sql/pglite";
import { ShardIdentifier } from "@shardkit/id";
import { type FencedTable, PartitionMap } from "@shardkit/ownership";
import { createShardRegistry, type LoadOption, shardRouting } from "@shardkit/prisma";
import { openShards, type RolloutEvent, rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/prisma/client.js";

/** Key fields: a bucket's holds and confirmations are colocated with it and route by its ID. */
export const routingModels = {
  Bucket: { keys: ["id"] },
  Hold: { keys: ["id", "bucketId"] },
  Confirmation: { keys: ["id", "bucketId"] },
};

/** Every table holding shard rows, for the partition map's fence and for moves. */
export const FENCED_TABLES: FencedTable[] = [
  { table: "Bucket", column: "id" },
  { table: "Hold", column: "id" },
  { table: "Confirmation", column: "id" },
  { table: "IdempotencyKey", column: "shard", kind: "bits" },
];

export const SCHEMA_DIR = new URL("../prisma/schema", import.meta.url).pathname;

/** One embedded database and the shards it holds at first (none: a spare, a move's target). */
export interface Database {
  name: string;
  pglite: PGlite;
  shards: readonly ShardIdentifier[];
}

/** Embedded PGlite databases (in memory, or under `dataDir`), with the schema rolled out to each. */
export async function embeddedDatabases(
  layout: readonly { name: string; shards: readonly ShardIdentifier[] }[],
  dataDir?: string,
  onProgress: (event: RolloutEvent) => void = () => {},
): Promise<Database[]> {
  const databases = layout.map((d) => ({
    ...d,
    pglite: new PGlite(dataDir ? `${dataDir}/${d.name}` : undefined),
  }));
  await rolloutSchema({
    schema: SCHEMA_DIR,
    targets: databases.map((d) => ({ name: d.name, adapter: new PrismaPGlite(d.pglite), shards: d.shards })),
    onProgress,
  });
  return databases;
}

/**
 * A router over the databases: its own Prisma clients, the registry, the routed client and the
 * partition map (attached to routing). A service instance, a desk or a mover each has its own.
 */
export async function openRouter(
  databases: readonly Database[],
  options: { poll?: boolean; load?: LoadOption } = {},
) {
  const clients = databases.map((d) => new PrismaClient({ adapter: new PrismaPGlite(d.pglite) }));
  const registry = createShardRegistry({
    shards: databases.flatMap((d, i) => d.shards.map((shard) => ({ shard, client: clients[i]! }))),
    databases: databases.map((d, i) => ({ client: clients[i]!, name: d.name })),
  });
  const db = clients[0]!.$extends(
    shardRouting({
      registry,
      models: routingModels,
      ...(options.load !== undefined ? { load: options.load } : {}),
    }),
  );
  const map = await PartitionMap.open({ registry, tables: FENCED_TABLES });
  if (options.poll) map.start();
  return {
    registry,
    db,
    map,
    database: (name: string) => registry.databases.find((p) => p.name === name)!,
    async close() {
      map.close();
      await registry.disconnect();
    },
  };
}

export type Router = Awaited<ReturnType<typeof openRouter>>;

/**
 * The service's router from its configuration: embedded PGlite databases (one per shard, under
 * `dataDir`) by default, or the PostgreSQL databases of `shardsJson` (the `SHARDKIT_SHARDS` format;
 * spare databases, the targets of moves, under `databases`). The schema is rolled out to each, a
 * database that is down starts later, and the partition map polls (unless `poll: false`).
 */
export async function openServiceRouter(options: {
  shardsJson?: string | undefined;
  dataDir: string;
  /** Re-read the partition map every second (default true); without, a move is learnt of when refused. */
  poll?: boolean;
  /** Load counting (`shardRouting`'s `load`): default on, flushed every 10 s. */
  load?: LoadOption;
}) {
  const opened = await openShards({
    schema: SCHEMA_DIR,
    createClient: (adapter) => new PrismaClient({ adapter }),
    shardsJson: options.shardsJson,
    embedded: {
      dataDir: options.dataDir,
      shards: [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1), ShardIdentifier.of(1, 0)],
    },
  });
  const { registry } = opened;
  const db = registry.databases[0]!.client.$extends(
    shardRouting({
      registry,
      models: routingModels,
      ...(options.load !== undefined ? { load: options.load } : {}),
    }),
  );
  const map = await PartitionMap.open({ registry, tables: FENCED_TABLES });
  if (options.poll ?? true) map.start();
  return {
    registry,
    db,
    map,
    describe: opened.describe,
    database: (name: string) => registry.databases.find((p) => p.name === name)!,
    async close() {
      map.close();
      await opened.close();
    },
  };
}
