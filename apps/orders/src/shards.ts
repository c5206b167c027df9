import { join } from "node:path";
import { ShardIdentifier } from "@shardkit/id";
import { type ShardRegistry, shardRouting } from "@shardkit/prisma";
import {
  type OpenShards,
  type OpenShardsOptions,
  openShards as openShardDatabases,
} from "@shardkit/prisma/rollout";
import { PrismaClient } from "./generated/prisma/client.js";

/** Key fields: every model is colocated with its customer, so each row routes by its own ID or its parent's. */
export const routingModels = {
  Order: { keys: ["id", "customerId"] },
  OrderItem: { keys: ["id", "orderId"] },
};

/** The embedded layout: four shards in two groups (0 = EU, 1 = MX), each its own PGlite database. */
export const EMBEDDED_SHARDS = [
  ShardIdentifier.of(0, 0),
  ShardIdentifier.of(0, 1),
  ShardIdentifier.of(1, 0),
  ShardIdentifier.of(1, 1),
];

export const SCHEMA_DIR = new URL("../prisma/schema", import.meta.url).pathname;

function routed(registry: ShardRegistry<PrismaClient>) {
  return registry.databases[0]!.client.$extends(shardRouting({ registry, models: routingModels }));
}

export type Db = ReturnType<typeof routed>;

/**
 * The shards, opened: `registry`, the routed client `db`, and from `openShards` each database's
 * state (a database down at start is `starting`, its shards answering 503, until it answers and
 * has the schema), `ready`, `health()`, `describe` and `close()`.
 */
export interface Shards extends OpenShards<PrismaClient> {
  db: Db;
}

export interface OpenOptions extends Pick<OpenShardsOptions<PrismaClient>, "shardsJson" | "retry" | "log"> {
  /** Folder of the embedded databases (PGlite, when `shardsJson` is absent). Default `.data` in the current directory. */
  dataDir?: string;
}

/**
 * Opens the shards and makes sure every one has the schema: embedded PGlite databases by default
 * (one per shard, under `dataDir`), real PostgreSQL when `shardsJson` (`SHARDKIT_SHARDS`) is given.
 * Progress lines (schema rollout, databases not ready yet) go to `log`, by default stderr.
 */
export async function openShards(options: OpenOptions = {}): Promise<Shards> {
  const { dataDir = join(process.cwd(), ".data"), ...rest } = options;
  const opened = await openShardDatabases({
    ...rest,
    schema: SCHEMA_DIR,
    createClient: (adapter) => new PrismaClient({ adapter }),
    embedded: { dataDir, shards: EMBEDDED_SHARDS },
  });
  return { ...opened, db: routed(opened.registry) };
}
