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
 * Prepared transactions each embedded database may hold at once (PGlite has one session, and an
 * atomic action prepares at most one per database; the rest wait for a coordinator that died).
 */
const EMBEDDED_PREPARED = 16;

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
  // The default progress lines say what the silent part is: a new PGlite database is created, and
  // every one started, before the first schema line (seconds each on a busy host).
  if (!options.onProgress) {
    const n = options.embedded.shards.length;
    logOf(options)(`opening ${n} embedded PGlite database(s) under ${options.embedded.dataDir}`);
  }
  const [{ PGlite }, { PrismaPGlite }] = await Promise.all([
    embeddedPackage(() => import("@electric-sql/pglite"), "@electric-sql/pglite"),
    embeddedPackage(() => import("pglite-prisma-adapter"), "pglite-prisma-adapter"),
  ]);
  const { dataDir } = options.embedded;
  mkdirSync(dataDir, { recursive: true });
  const databases = options.embedded.shards.map((shard) => ({
    shard,
    // Prepared transactions enabled, so atomic actions across these shards run as on a server.
    pglite: new PGlite(join(dataDir, `shard-${shard.group}-${shard.member}`), {
      postgresqlconf: [`max_prepared_transactions = ${EMBEDDED_PREPARED}`],
    }),
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
