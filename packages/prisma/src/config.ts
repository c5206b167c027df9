import { MAX_GROUP, MAX_MEMBER, ShardIdentifier } from "@shardkit/id";
import { z } from "zod";
import { DEFAULT_POOL_SIZE } from "./budget.js";
import { RegistryConfigError } from "./errors.js";
import {
  type DatabaseLabels,
  formatLabels,
  freezeLabels,
  labelsSchema,
  type PlacementRuleInput,
  placementRuleSchema,
  readPlacementRules,
  sameLabels,
} from "./placement.js";
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
  /**
   * The URL reaches a connection pooler in transaction mode (PgBouncer, Supavisor), not the server:
   * its pool counts against the pooler's client limit, so the server's connection budget leaves it out.
   */
  pooler: z.boolean().optional(),
  /** URLs of the database's read replicas (streaming copies); entries with the same URL give the same list. */
  replicas: z.array(z.string().min(1)).optional(),
  /** The database's labels (`{ region: "eu" }`), which `placement` rules match; entries with the same URL give the same. */
  labels: labelsSchema.optional(),
});

const spareEntry = z.strictObject({
  url: z.string().min(1),
  pool: z.int().min(1).max(10_000).optional(),
  pooler: z.boolean().optional(),
  replicas: z.array(z.string().min(1)).optional(),
  labels: labelsSchema.optional(),
});

type ShardEntry = z.infer<typeof shardEntry>;
type SpareEntry = z.infer<typeof spareEntry>;
/** A configuration as the checks after parsing read it: entries they cannot read are null. */
interface Salvaged {
  shards: (ShardEntry | null)[];
  databases?: (SpareEntry | null)[] | undefined;
  defaultShard?: string | undefined;
  unknownShard?: "fail" | "default" | undefined;
  /** The placement rules as given; a rule zod refused is null (its issues are zod's). */
  placement?: unknown;
}

/**
 * What of a configuration zod refused the later checks can still read: each field that parses on
 * its own (a `pool: 0` is left out, the entry's URL and shard are kept); an entry without a
 * readable group, member or URL is null (its own issues are zod's).
 */
function salvage(input: unknown): Salvaged {
  const fields = (shape: z.ZodRawShape, entry: unknown): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    if (entry === null || typeof entry !== "object") return out;
    for (const [key, schema] of Object.entries(shape)) {
      const result = (schema as z.ZodType).safeParse((entry as Record<string, unknown>)[key]);
      if (result.success && result.data !== undefined) out[key] = result.data;
    }
    return out;
  };
  const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
  const raw = input !== null && typeof input === "object" ? (input as Record<string, unknown>) : {};
  const top = fields({ defaultShard: shardKey, unknownShard: registryConfig.shape.unknownShard }, raw);
  return {
    shards: list(raw.shards).map((entry) => {
      const e = fields(shardEntry.shape, entry);
      return "group" in e && "member" in e && "url" in e ? (e as ShardEntry) : null;
    }),
    databases: list(raw.databases).map((entry) => {
      const e = fields(spareEntry.shape, entry);
      return "url" in e ? (e as SpareEntry) : null;
    }),
    ...(top as Pick<Salvaged, "defaultShard" | "unknownShard">),
    // Rules zod refused are left out (null) here: its issues name them already.
    placement: Array.isArray(raw.placement)
      ? raw.placement.map((rule) => (placementRuleSchema.safeParse(rule).success ? rule : null))
      : undefined,
  };
}

const registryConfig = z.strictObject({
  shards: z.array(shardEntry).min(1),
  /** Databases that hold no shard yet: the targets of shard moves. */
  databases: z.array(spareEntry).optional(),
  defaultShard: shardKey.optional(),
  unknownShard: z.enum(["fail", "default"]).optional(),
  /** Placement rules: which databases (by their labels) the data of shard groups may live on. */
  placement: z.array(placementRuleSchema).optional(),
});

/**
 * The JSON form of a registry: `[{ group, member, url, pool?, pooler?, replicas?, labels? }]`, or
 * `{ shards, databases?, defaultShard?, unknownShard?, placement? }` where `databases` lists spare
 * databases (`{ url, pool?, pooler?, replicas?, labels? }`) that hold no shard yet, the targets of
 * shard moves. `labels` (`{ region: "eu" }`) describe a database; `placement` rules
 * (`[{ groups: [1, 2], labels: { region: ["eu", "ch"] } }]`) say which labels the databases holding
 * those groups' data must have.
 * `replicas` are the URLs of a database's read replicas; each gets a client with the database's
 * pool size. `pooler: true` says the URL reaches a transaction-mode pooler: its pool is left out of
 * the server's connection budget.
 */
export type ShardRegistryConfig = z.input<typeof registryConfig> | z.input<typeof registryConfig>["shards"];

/** A replica URL of the config and where it was given. */
type Replica = { url: string; path: string };
/** One physical database of the config: its shards, pool and replicas, and where they were given. */
type ConfigDatabase = {
  shards: ShardIdentifier[];
  pool: number | undefined;
  pooler?: boolean;
  first: number;
  replicas?: Replica[];
  at?: string;
  labels?: DatabaseLabels;
  /** Where its labels were given. */
  labelsAt?: string;
};

export interface FromConfigOptions<Client extends ShardClient> {
  /**
   * Builds the client of one physical database; called once per distinct URL, and once per replica
   * URL. `database.pool` is the pool size to give its driver adapter (`new PrismaPg({
   * connectionString: url, max: pool })`): the entry's `pool`, else `DEFAULT_POOL_SIZE` (10); a
   * replica gets its database's. For a replica, `database.replicaOf` is the URL of the database it
   * copies (and `shards` that database's shards); for a database it is absent.
   */
  createClient(
    url: string,
    shards: ShardIdentifier[],
    database: { pool: number; replicaOf?: string },
  ): Client;
  /** URL schemes accepted. Default `["postgres:", "postgresql:"]`. */
  protocols?: string[];
  logger?: { warn(message: string): void };
}

/** Whether `raw` parses as a URL of one of `protocols`; if not, the problem is added to `issues`, at `path`. */
function isAcceptedUrl(raw: string, path: string, protocols: readonly string[], issues: string[]): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    issues.push(`${path}: not a URL: ${redactUrl(raw)}`);
    return false;
  }
  if (!protocols.includes(url.protocol)) {
    issues.push(`${path}: scheme ${url.protocol} is not one of ${protocols.join(", ")}`);
    return false;
  }
  return true;
}

/**
 * Builds a registry from its JSON form, validated before any client is created: a malformed
 * entry, a duplicate shard, a default shard that is not listed or a bad URL throws
 * `RegistryConfigError` naming the path of each problem. Shards with the same URL share one client.
 * Longer than 80 lines: every entry checked in one pass, each problem named, before any client.
 */
export function shardRegistryFromConfig<Client extends ShardClient>(
  config: unknown,
  options: FromConfigOptions<Client>,
): ShardRegistry<Client> {
  // The bare-array form is the `shards` list; errors name paths as `shards[i]...` either way.
  const input = Array.isArray(config) ? { shards: config } : config;
  const parsed = registryConfig.safeParse(input);
  // A configuration zod refuses is still checked below, as far as its fields allow: every problem
  // is reported at once, not only the first kind found.
  const issues: string[] = parsed.success
    ? []
    : parsed.error.issues.map((issue) => `${formatPath(issue.path) || "(root)"}: ${issue.message}`);
  const value: Salvaged = parsed.success ? parsed.data : salvage(input);
  const protocols = options.protocols ?? ["postgres:", "postgresql:"];
  const byUrl = new Map<string, ConfigDatabase>();
  /** Checks an entry's replica URLs and records them on its database (entries of one URL must agree). */
  const replicasOf = (database: ConfigDatabase, replicas: string[] | undefined, path: string) => {
    if (replicas === undefined) return;
    const valid: Replica[] = [];
    replicas.forEach((replica, j) => {
      if (!isAcceptedUrl(replica, `${path}.replicas[${j}]`, protocols, issues)) return;
      if (valid.some((r) => r.url === replica)) {
        issues.push(`${path}.replicas[${j}]: listed twice`);
        return;
      }
      valid.push({ url: replica, path: `${path}.replicas[${j}]` });
    });
    if (database.replicas !== undefined) {
      const given = database.replicas.map((r) => r.url);
      const same = given.length === valid.length && valid.every((r) => given.includes(r.url));
      if (!same) {
        issues.push(
          `${path}.replicas: differ from the replicas given for the same database (${database.at}); entries with one URL share one database and its replicas`,
        );
      }
      return;
    }
    database.replicas = valid;
    database.at = path;
  };
  /** Records an entry's labels on its database (entries of one URL must agree). */
  const labelsOf = (database: ConfigDatabase, labels: Record<string, string> | undefined, path: string) => {
    if (labels === undefined) return;
    const given = freezeLabels(labels);
    if (database.labels !== undefined) {
      if (!sameLabels(database.labels, given))
        issues.push(
          `${path}.labels: ${formatLabels(given)} differ from the labels ${formatLabels(database.labels)} given for the same database (${database.labelsAt}); entries with one URL share one database and its labels`,
        );
      return;
    }
    database.labels = given;
    database.labelsAt = path;
  };
  const seen = new Map<string, number>();
  value.shards.forEach((entry, i) => {
    if (!entry) return;
    const shard = ShardIdentifier.of(entry.group, entry.member);
    const previous = seen.get(shard.key);
    if (previous !== undefined)
      issues.push(`shards[${i}]: duplicate shard ${shard.key} (also shards[${previous}])`);
    seen.set(shard.key, i);
    if (!isAcceptedUrl(entry.url, `shards[${i}].url`, protocols, issues)) return;
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
    if (entry.pooler !== undefined) {
      if (database.pooler !== undefined && database.pooler !== entry.pooler) {
        issues.push(
          `shards[${i}].pooler: ${entry.pooler} differs from the pooler ${database.pooler} given for the same database (shards[${database.first}]); entries with one URL share one pool`,
        );
      }
      database.pooler = entry.pooler;
    }
    replicasOf(database, entry.replicas, `shards[${i}]`);
    labelsOf(database, entry.labels, `shards[${i}]`);
    byUrl.set(entry.url, database);
  });
  (value.databases ?? []).forEach((entry, i) => {
    if (!entry) return;
    if (!isAcceptedUrl(entry.url, `databases[${i}].url`, protocols, issues)) return;
    if (byUrl.has(entry.url)) {
      issues.push(
        `databases[${i}].url: already the database of a shard; list a spare database once, under databases only`,
      );
      return;
    }
    const database: ConfigDatabase = {
      shards: [],
      pool: entry.pool,
      first: -1,
      ...(entry.pooler === undefined ? {} : { pooler: entry.pooler }),
    };
    replicasOf(database, entry.replicas, `databases[${i}]`);
    labelsOf(database, entry.labels, `databases[${i}]`);
    byUrl.set(entry.url, database);
  });
  const replicaOf = new Map<string, string>();
  for (const [url, database] of byUrl) {
    for (const { url: replica, path } of database.replicas ?? []) {
      if (byUrl.has(replica)) {
        issues.push(
          `${path}: ${redactUrl(replica)} is a database of the registry; a replica is a copy of one`,
        );
      } else if (replicaOf.has(replica)) {
        issues.push(
          `${path}: ${redactUrl(replica)} is already a replica of ${redactUrl(replicaOf.get(replica)!)}; a replica copies one database`,
        );
      } else replicaOf.set(replica, url);
    }
  }
  if (value.defaultShard !== undefined && !seen.has(value.defaultShard)) {
    issues.push(`defaultShard: ${value.defaultShard} is not one of the listed shards`);
  }
  if (value.unknownShard === "default" && value.defaultShard === undefined) {
    issues.push("defaultShard: required when unknownShard is 'default'");
  }
  // The rules against the databases' labels (their type problems, if any, are zod's above).
  const placement = readPlacementRules(
    value.placement,
    [...byUrl].map(([url, d]) => ({ name: redactUrl(url), labels: d.labels ?? {} })),
    { parse: false },
  );
  issues.push(...placement.issues);
  if (issues.length > 0 || !parsed.success) throw new RegistryConfigError(issues);

  const shards: { shard: ShardIdentifier; client: Client }[] = [];
  const databases: {
    client: Client;
    name: string;
    pool?: number;
    labels?: Record<string, string>;
    replicas: { client: Client; name: string; pool?: number }[];
  }[] = [];
  for (const [url, database] of byUrl) {
    const pool = database.pool ?? DEFAULT_POOL_SIZE;
    const client = options.createClient(url, database.shards, { pool });
    for (const shard of database.shards) shards.push({ shard, client });
    // Behind a pooler the pool is the pooler's client connections: the server's budget leaves it out.
    const counted = database.pooler ? {} : { pool };
    const replicas = (database.replicas ?? []).map(({ url: replica }) => ({
      client: options.createClient(replica, database.shards, { pool, replicaOf: url }),
      name: redactUrl(replica),
      ...counted,
    }));
    databases.push({
      client,
      name: redactUrl(url),
      ...counted,
      ...(database.labels ? { labels: { ...database.labels } } : {}),
      replicas,
    });
  }
  return createShardRegistry({
    shards,
    databases,
    ...(value.defaultShard !== undefined ? { defaultShard: value.defaultShard } : {}),
    ...(value.unknownShard !== undefined ? { unknownShard: value.unknownShard } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(value.placement !== undefined ? { placement: value.placement as PlacementRuleInput[] } : {}),
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
