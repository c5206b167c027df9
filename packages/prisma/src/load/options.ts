// The `load` option of `shardRouting` and `openShards`, checked once.

/** What `shardRouting({ load })` and `openShards({ load })` take (see `ShardRoutingOptions.load`). */
export interface LoadOptions {
  /** How often the router writes its window to each database (ms). Default 10,000. */
  intervalMs?: number;
  /**
   * How long load history is kept (ms, every router's): the 10 min and 1 h rollups older than this
   * are deleted by the routers' rollups (never those of the last day), windows by the flushes (never
   * those of the last hour). Default 30 days.
   */
  retainMs?: number;
  /** Heavy hitters kept per shard and window (space-saving counters). Default 16; 0 keeps none. */
  topKeys?: number;
  /** Store the routing key values themselves in `top`, not their hashes. Default false. */
  plainKeys?: boolean;
  /**
   * The key of the hash that names heavy hitters (HMAC-SHA-256, 16 hex digits). Give every router
   * the same secret one so hashes merge across routers and cannot be guessed from likely values;
   * default: a fixed public key (hashes merge, but a known value can be recognised).
   */
  keySalt?: string;
  /** How long one flush statement may take before it counts as failed (ms). Default min(intervalMs, 5,000). */
  deadlineMs?: number;
}

/** `false` turns load counting off; default on. */
export type LoadOption = false | LoadOptions | undefined;

export interface ResolvedLoadOptions {
  intervalMs: number;
  retainMs: number;
  topKeys: number;
  plainKeys: boolean;
  keySalt: string;
  deadlineMs: number;
}

export const DEFAULT_LOAD_INTERVAL_MS = 10_000;
export const DEFAULT_LOAD_RETAIN_MS = 30 * 24 * 60 * 60 * 1000;
export const DEFAULT_TOP_KEYS = 16;
const DEFAULT_SALT = "shardkit/load/1";

const positive = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v > 0;

/** The options in force, or the problems of `option` (at `at`), added to `issues`. Null for `false`. */
export function loadOptionsOf(option: LoadOption, at: string, issues: string[]): ResolvedLoadOptions | null {
  if (option === false) return null;
  if (option !== undefined && (option === null || typeof option !== "object")) {
    issues.push(`${at}: expected false or { intervalMs?, retainMs?, topKeys?, plainKeys?, keySalt? }`);
    return null;
  }
  const o = option ?? {};
  const intervalMs = o.intervalMs ?? DEFAULT_LOAD_INTERVAL_MS;
  const retainMs = o.retainMs ?? DEFAULT_LOAD_RETAIN_MS;
  const topKeys = o.topKeys ?? DEFAULT_TOP_KEYS;
  const deadlineMs = o.deadlineMs ?? Math.min(intervalMs, 5_000);
  if (!positive(intervalMs) || intervalMs >= 2 ** 31)
    issues.push(`${at}.intervalMs: expected a positive number of ms below 2^31, got ${String(intervalMs)}`);
  if (!positive(retainMs))
    issues.push(`${at}.retainMs: expected a positive number of ms, got ${String(retainMs)}`);
  if (!(Number.isInteger(topKeys) && topKeys >= 0 && topKeys <= 1024))
    issues.push(`${at}.topKeys: expected an integer from 0 to 1024, got ${String(topKeys)}`);
  if (!positive(deadlineMs))
    issues.push(`${at}.deadlineMs: expected a positive number of ms, got ${String(deadlineMs)}`);
  if (o.plainKeys !== undefined && typeof o.plainKeys !== "boolean")
    issues.push(`${at}.plainKeys: expected a boolean`);
  if (o.keySalt !== undefined && (typeof o.keySalt !== "string" || o.keySalt === ""))
    issues.push(`${at}.keySalt: expected a non-empty string`);
  return {
    intervalMs,
    retainMs,
    topKeys,
    plainKeys: o.plainKeys === true,
    keySalt: o.keySalt ?? DEFAULT_SALT,
    deadlineMs,
  };
}

/** The `load` an `openShards` gave its registry: `shardRouting` on that registry takes it as its default. */
const defaults = new WeakMap<object, LoadOption>();

export function setRegistryLoad(registry: object, option: LoadOption): void {
  defaults.set(registry, option);
}

export function registryLoad(registry: object): LoadOption {
  return defaults.get(registry);
}
