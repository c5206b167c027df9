import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import {
  createShardRegistry,
  type ShardRegistry,
  shardRegistryFromEnv,
  shardRouting,
} from "@shardkit/prisma";
import { type RolloutTarget, rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaPGlite } from "pglite-prisma-adapter";
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
  return registry.physical[0]!.client.$extends(shardRouting({ registry, models: routingModels }));
}

export type Db = ReturnType<typeof routed>;

export interface Shards {
  registry: ShardRegistry<PrismaClient>;
  db: Db;
  /** Where the data lives, for people: "embedded PGlite under ./.data" or the database URLs. */
  describe: string;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** JSON `[{ group, member, url }]` (the `SHARDKIT_SHARDS` format); when absent, embedded PGlite. */
  shardsJson?: string | undefined;
  /** Folder of the embedded databases. Default `.data` in the current directory. */
  dataDir?: string;
  /** Progress lines (schema rollout). Default: stderr. */
  log?: (line: string) => void;
}

/**
 * Opens the shards and makes sure every one has the schema: embedded PGlite databases by default
 * (one per shard, under `dataDir`), real PostgreSQL when `shardsJson` is given.
 */
export async function openShards(options: OpenOptions = {}): Promise<Shards> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const onProgress = (event: {
    type: string;
    index: number;
    total: number;
    target: string;
    report?: { status: string };
  }) => {
    if (event.type === "done")
      log(`schema ${event.index + 1}/${event.total} ${event.target}: ${event.report?.status}`);
  };
  if (options.shardsJson) {
    const urls = new Map<string, ShardIdentifier[]>();
    const registry = shardRegistryFromEnv({
      env: { SHARDKIT_SHARDS: options.shardsJson },
      createClient: (url, shards) => {
        urls.set(url, shards);
        return new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
      },
    });
    const targets: RolloutTarget[] = [...urls].map(([url, shards]) => ({
      name: redact(url),
      adapter: new PrismaPg({ connectionString: url }),
      shards,
    }));
    await rolloutSchema({ schema: SCHEMA_DIR, targets, onProgress });
    return {
      registry,
      db: routed(registry),
      describe: targets.map((t) => t.name).join(", "),
      close: () => registry.disconnect(),
    };
  }
  const dataDir = options.dataDir ?? join(process.cwd(), ".data");
  mkdirSync(dataDir, { recursive: true });
  const databases = EMBEDDED_SHARDS.map((shard) => ({
    shard,
    pglite: new PGlite(join(dataDir, `shard-${shard.group}-${shard.member}`)),
  }));
  await rolloutSchema({
    schema: SCHEMA_DIR,
    targets: databases.map(({ shard, pglite }) => ({
      name: `shard ${shard.key}`,
      adapter: new PrismaPGlite(pglite),
      shards: [shard],
    })),
    onProgress,
  });
  const registry = createShardRegistry({
    shards: databases.map(({ shard, pglite }) => ({
      shard,
      client: new PrismaClient({ adapter: new PrismaPGlite(pglite) }),
    })),
  });
  return {
    registry,
    db: routed(registry),
    describe: `embedded PGlite, one database per shard, under ${dataDir}`,
    async close() {
      await registry.disconnect();
      for (const { pglite } of databases) await pglite.close();
    },
  };
}

function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@");
}
