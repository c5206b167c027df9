import { join } from "node:path";
import { ShardIdentifier } from "@shardkit/id";
import { type DatabaseStatus, type HealthReport, type ShardRegistry, shardRouting } from "@shardkit/prisma";
import { openShards as openShardDatabases } from "@shardkit/prisma/rollout";
import { PrismaClient } from "./generated/prisma/client.js";

/** Key fields: every model is colocated with its customer, so each row routes by its own ID or its parent's. */
export const routingModels = {
  Wallet: { keys: ["id", "customerId"] },
  Entry: { keys: ["id", "walletId"] },
  Transfer: { keys: ["id", "fromWalletId"] },
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
  /**
   * Each database's state: a database that was down at start is `starting` (its shards answer 503)
   * until it answers and has the schema, then `ready`.
   */
  databases(): DatabaseStatus[];
  /** Resolves once every database is ready. */
  ready: Promise<void>;
  /** Each shard's health now: ready databases probed (bounded), the others with their state. */
  health(options?: { timeoutMs?: number }): Promise<HealthReport>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** JSON `[{ group, member, url }]` (the `SHARDKIT_SHARDS` format); when absent, embedded PGlite. */
  shardsJson?: string | undefined;
  /** Folder of the embedded databases. Default `.data` in the current directory. */
  dataDir?: string;
  /** Progress lines (schema rollout, databases not ready yet). Default: stderr. */
  log?: (line: string) => void;
  /** Backoff between the retries of a database that was down at start. Default 500 ms to 10 s. */
  retry?: { baseMs?: number; maxMs?: number };
}

/**
 * Opens the shards and makes sure every one has the schema: embedded PGlite databases by default
 * (one per shard, under `dataDir`), real PostgreSQL when `shardsJson` is given.
 */
export async function openShards(options: OpenOptions = {}): Promise<Shards> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const opened = await openShardDatabases({
    schema: SCHEMA_DIR,
    createClient: (adapter) => new PrismaClient({ adapter }),
    shardsJson: options.shardsJson,
    ...(options.retry ? { retry: options.retry } : {}),
    embedded: { dataDir: options.dataDir ?? join(process.cwd(), ".data"), shards: EMBEDDED_SHARDS },
    onProgress: (event) => {
      if (event.type === "done")
        log(`schema ${event.index + 1}/${event.total} ${event.target}: ${event.report.status}`);
    },
    onState: (status) =>
      log(
        `shards ${status.shards.join(", ")} on ${status.name}: ${status.state}${status.error ? ` (${status.error})` : ""}`,
      ),
  });
  return { ...opened, db: routed(opened.registry) };
}
