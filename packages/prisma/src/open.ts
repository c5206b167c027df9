import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { ShardIdentifier } from "@shardkit/id";
import { checkDatabases } from "./budget.js";
import { redactUrl, shardRegistryFromEnv } from "./config.js";
import { RegistryConfigError } from "./errors.js";
import { createShardRegistry, type ShardClient, type ShardRegistry } from "./registry.js";
import { type RolloutEvent, type RolloutTarget, rolloutSchema } from "./schema-rollout.js";

export interface OpenShardsOptions<Client extends ShardClient> {
  /** The Prisma schema (file or folder) every database gets, pushed at open. */
  schema: string;
  /** Builds the client of one database from its driver adapter: `(adapter) => new PrismaClient({ adapter })`. */
  createClient(adapter: SqlMigrationAwareDriverAdapterFactory): Client;
  /**
   * The shards as JSON in the `SHARDKIT_SHARDS` format (`[{ group, member, url }]` or
   * `{ shards, defaultShard?, unknownShard? }`): real PostgreSQL through `@prisma/adapter-pg`.
   * When absent (undefined), `embedded` is used; set but blank is an error, never a fallback.
   */
  shardsJson?: string | undefined;
  /** Embedded PGlite: one database per shard under `dataDir` (needs `@electric-sql/pglite` and `pglite-prisma-adapter`). */
  embedded?: { dataDir: string; shards: readonly ShardIdentifier[] };
  /**
   * What an open does when the pools (`pool` per entry of `shardsJson`, default 10) of the
   * databases on one server add up to more than its `max_connections` allows: `'error'` (default)
   * throws `ConnectionBudgetError` naming the server and every pool; `'warn'` logs it.
   */
  connectionBudget?: "error" | "warn";
  /** Schema rollout progress. Default: one line per database on stderr. */
  onProgress?: (event: RolloutEvent) => void;
}

export interface OpenShards<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Where the data lives, for people: the embedded folder or the (password-less) URLs. */
  describe: string;
  /** Disconnects every client (and closes embedded databases). */
  close(): Promise<void>;
}

/**
 * One way to start a sharded service: embedded PGlite shards for development and demos, real
 * PostgreSQL by configuration, with the schema rolled out to every database before the registry
 * is returned. Only the configuration changes between the two; the code that uses the registry
 * does not.
 */
export async function openShards<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
): Promise<OpenShards<Client>> {
  const onProgress = options.onProgress ?? progressLine;
  if (options.shardsJson !== undefined) {
    const { PrismaPg } = await import("@prisma/adapter-pg");
    const targets: RolloutTarget[] = [];
    const registry = shardRegistryFromEnv({
      env: { SHARDKIT_SHARDS: options.shardsJson },
      createClient: (url, shards, { pool }) => {
        targets.push({
          name: redactUrl(url),
          adapter: new PrismaPg({ connectionString: url, max: 1 }),
          shards,
        });
        return options.createClient(new PrismaPg({ connectionString: url, max: pool }));
      },
    });
    try {
      // Before any schema change: one database listed twice, or a budget that cannot hold, is a
      // configuration error.
      await checkDatabases(registry, { onExceeded: options.connectionBudget ?? "error" });
      await rolloutSchema({ schema: options.schema, targets, onProgress });
    } catch (error) {
      await registry.disconnect();
      throw error;
    }
    return { registry, describe: targets.map((t) => t.name).join(", "), close: () => registry.disconnect() };
  }
  if (!options.embedded) {
    throw new RegistryConfigError(["openShards: no shardsJson and no embedded configuration"]);
  }
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([
    import("@electric-sql/pglite"),
    import("pglite-prisma-adapter"),
  ]);
  const { dataDir } = options.embedded;
  mkdirSync(dataDir, { recursive: true });
  const databases = options.embedded.shards.map((shard) => ({
    shard,
    pglite: new PGlite(join(dataDir, `shard-${shard.group}-${shard.member}`)),
  }));
  await rolloutSchema({
    schema: options.schema,
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
      client: options.createClient(new PrismaPGlite(pglite)),
    })),
  });
  return {
    registry,
    describe: `embedded PGlite, one database per shard, under ${dataDir}`,
    async close() {
      await registry.disconnect();
      for (const { pglite } of databases) await pglite.close();
    },
  };
}

function progressLine(event: RolloutEvent): void {
  if (event.type === "done") {
    process.stderr.write(
      `schema ${event.index + 1}/${event.total} ${event.target}: ${event.report.status}\n`,
    );
  }
}
