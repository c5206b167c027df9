// Opening embedded PGlite shards (development and demos): one database per shard under a folder,
// the schema rolled out to each, and the packages they need imported with a clear error when absent.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { RegistryConfigError } from "../errors.js";
import { shardHealth } from "../health.js";
import { createShardRegistry, type ShardClient } from "../registry.js";
import { rolloutSchema } from "../schema/schema-rollout.js";
import { logOf, type OpenShards, type OpenShardsOptions, progressLine } from "./open-options.js";

/**
 * A package embedded shards need, imported: one that is not installed is a `RegistryConfigError`
 * naming what to install, or to give PostgreSQL databases instead.
 */
export async function embeddedPackage<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ERR_MODULE_NOT_FOUND") throw error;
    throw new RegistryConfigError(
      [
        `embedded (PGlite) shards need ${name}, which is not installed: install @electric-sql/pglite and pglite-prisma-adapter (npm install @electric-sql/pglite pglite-prisma-adapter), or give PostgreSQL databases (shardsJson; SHARDKIT_SHARDS in the templates)`,
      ],
      { cause: error },
    );
  }
}

export async function openEmbedded<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
): Promise<OpenShards<Client>> {
  if (!options.embedded) {
    throw new RegistryConfigError(["openShards: no shardsJson and no embedded configuration"]);
  }
  const onProgress = options.onProgress ?? progressLine(logOf(options));
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([
    embeddedPackage(() => import("@electric-sql/pglite"), "@electric-sql/pglite"),
    embeddedPackage(() => import("pglite-prisma-adapter"), "pglite-prisma-adapter"),
  ]);
  const { dataDir } = options.embedded;
  mkdirSync(dataDir, { recursive: true });
  const databases = options.embedded.shards.map((shard) => ({
    shard,
    pglite: new PGlite(join(dataDir, `shard-${shard.group}-${shard.member}`)),
  }));
  // Only where the recorded fingerprint does not match, one database after another: PGlite runs
  // on this thread, as the engine does, so running several at once would gain nothing.
  await rolloutSchema({
    schema: options.schema,
    skipUnchanged: true,
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
      client: options.createClient(new PrismaPGlite(pglite), { name: `shard ${shard.key}` }),
    })),
  });
  const since = new Date();
  return {
    registry,
    describe: `embedded PGlite, one database per shard, under ${dataDir}`,
    databases: () =>
      registry.databases.map((p) => ({
        name: p.name,
        shards: p.shards.map((s) => s.key),
        state: "ready",
        since,
        attempts: 1,
      })),
    ready: Promise.resolve(),
    health: (health) => shardHealth(registry, health ?? {}),
    async close() {
      await registry.disconnect();
      for (const { pglite } of databases) await pglite.close();
    },
  };
}
