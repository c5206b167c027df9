import { MAX_GROUP, MAX_MEMBER, ShardIdentifier } from "@shardkit/id";
import { z } from "zod";
import { DEFAULT_POOL_SIZE } from "./budget.js";
import { RegistryConfigError } from "./errors.js";
import { createShardRegistry, type ShardClient, type ShardRegistry } from "./registry.js";

const shardKey = z.string().refine(
  (key) => {
    try {
      ShardIdentifier.parse(key);
      return true;
    } catch {
      return false;
    }
  },
  { error: 'expected a shard key "group/member", e.g. "0/0"' },
);

const shardEntry = z.strictObject({
  group: z.int().min(0).max(MAX_GROUP),
  member: z.int().min(0).max(MAX_MEMBER),
  url: z.string().min(1),
  /** Connections the database's pool may open (entries with the same URL share one pool). */
  pool: z.int().min(1).max(10_000).optional(),
});

const spareEntry = z.strictObject({
  url: z.string().min(1),
  pool: z.int().min(1).max(10_000).optional(),
});

const registryConfig = z.strictObject({
  shards: z.array(shardEntry).min(1),
  /** Databases that hold no shard yet: the targets of shard moves. */
  databases: z.array(spareEntry).optional(),
  defaultShard: shardKey.optional(),
  unknownShard: z.enum(["fail", "default"]).optional(),
});

/**
 * The JSON form of a registry: `[{ group, member, url, pool? }]`, or
 * `{ shards, databases?, defaultShard?, unknownShard? }` where `databases` lists spare databases
 * (`{ url, pool? }`) that hold no shard yet, the targets of shard moves.
 */
export type ShardRegistryConfig = z.input<typeof registryConfig> | z.input<typeof registryConfig>["shards"];

export interface FromConfigOptions<Client extends ShardClient> {
  /**
   * Builds the client of one physical database; called once per distinct URL. `database.pool` is
   * the pool size to give its driver adapter (`new PrismaPg({ connectionString: url, max: pool })`):
   * the entry's `pool`, else `DEFAULT_POOL_SIZE` (10).
   */
  createClient(url: string, shards: ShardIdentifier[], database: { pool: number }): Client;
  /** URL schemes accepted. Default `["postgres:", "postgresql:"]`. */
  protocols?: string[];
  logger?: { warn(message: string): void };
}

/**
 * Builds a registry from its JSON form, validated before any client is created: a malformed
 * entry, a duplicate shard, a default shard that is not listed or a bad URL throws
 * `RegistryConfigError` naming the path of each problem. Shards with the same URL share one client.
 */
export function shardRegistryFromConfig<Client extends ShardClient>(
  config: unknown,
  options: FromConfigOptions<Client>,
): ShardRegistry<Client> {
  // The bare-array form is the `shards` list; errors name paths as `shards[i]...` either way.
  const parsed = registryConfig.safeParse(Array.isArray(config) ? { shards: config } : config);
  if (!parsed.success) {
    throw new RegistryConfigError(
      parsed.error.issues.map((issue) => `${formatPath(issue.path) || "(root)"}: ${issue.message}`),
    );
  }
  const value = parsed.data;
  const protocols = options.protocols ?? ["postgres:", "postgresql:"];
  const issues: string[] = [];
  const byUrl = new Map<string, { shards: ShardIdentifier[]; pool: number | undefined; first: number }>();
  const seen = new Map<string, number>();
  value.shards.forEach((entry, i) => {
    const shard = ShardIdentifier.of(entry.group, entry.member);
    const previous = seen.get(shard.key);
    if (previous !== undefined)
      issues.push(`shards[${i}]: duplicate shard ${shard.key} (also shards[${previous}])`);
    seen.set(shard.key, i);
    let url: URL;
    try {
      url = new URL(entry.url);
    } catch {
      issues.push(`shards[${i}].url: not a URL: ${redactUrl(entry.url)}`);
      return;
    }
    if (!protocols.includes(url.protocol)) {
      issues.push(`shards[${i}].url: scheme ${url.protocol} is not one of ${protocols.join(", ")}`);
      return;
    }
    const database = byUrl.get(entry.url) ?? { shards: [], pool: undefined, first: i };
    database.shards.push(shard);
    if (entry.pool !== undefined) {
      if (database.pool !== undefined && database.pool !== entry.pool) {
        issues.push(
          `shards[${i}].pool: ${entry.pool} differs from the pool ${database.pool} given for the same database (shards[${database.first}]); entries with one URL share one pool`,
        );
      }
      database.pool = entry.pool;
    }
    byUrl.set(entry.url, database);
  });
  (value.databases ?? []).forEach((entry, i) => {
    let url: URL;
    try {
      url = new URL(entry.url);
    } catch {
      issues.push(`databases[${i}].url: not a URL: ${redactUrl(entry.url)}`);
      return;
    }
    if (!protocols.includes(url.protocol)) {
      issues.push(`databases[${i}].url: scheme ${url.protocol} is not one of ${protocols.join(", ")}`);
      return;
    }
    if (byUrl.has(entry.url)) {
      issues.push(
        `databases[${i}].url: already the database of a shard; list a spare database once, under databases only`,
      );
      return;
    }
    byUrl.set(entry.url, { shards: [], pool: entry.pool, first: -1 });
  });
  if (value.defaultShard !== undefined && !seen.has(value.defaultShard)) {
    issues.push(`defaultShard: ${value.defaultShard} is not one of the listed shards`);
  }
  if (value.unknownShard === "default" && value.defaultShard === undefined) {
    issues.push("defaultShard: required when unknownShard is 'default'");
  }
  if (issues.length > 0) throw new RegistryConfigError(issues);

  const shards: { shard: ShardIdentifier; client: Client }[] = [];
  const databases: { client: Client; name: string; pool: number }[] = [];
  for (const [url, database] of byUrl) {
    const pool = database.pool ?? DEFAULT_POOL_SIZE;
    const client = options.createClient(url, database.shards, { pool });
    for (const shard of database.shards) shards.push({ shard, client });
    databases.push({ client, name: redactUrl(url), pool });
  }
  return createShardRegistry({
    shards,
    databases,
    ...(value.defaultShard !== undefined ? { defaultShard: value.defaultShard } : {}),
    ...(value.unknownShard !== undefined ? { unknownShard: value.unknownShard } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
}

/**
 * `shardRegistryFromConfig` on the JSON in an environment variable (default `SHARDKIT_SHARDS`).
 * A missing variable or invalid JSON throws `RegistryConfigError`.
 */
export function shardRegistryFromEnv<Client extends ShardClient>(
  options: FromConfigOptions<Client> & { variable?: string; env?: Record<string, string | undefined> },
): ShardRegistry<Client> {
  const variable = options.variable ?? "SHARDKIT_SHARDS";
  const text = (options.env ?? process.env)[variable];
  if (text === undefined) throw new RegistryConfigError([`${variable}: not set`]);
  if (text.trim() === "") {
    throw new RegistryConfigError([
      `${variable}: set but empty; give the shards as JSON ([{ "group", "member", "url" }, ...]), or unset it`,
    ]);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new RegistryConfigError([`${variable}: not valid JSON (${(err as Error).message})`]);
  }
  return shardRegistryFromConfig(json, options);
}

function formatPath(path: PropertyKey[]): string {
  return path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`))
    .join("");
}

/** Hides a password in a URL-ish string before it reaches an error message. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@");
}
