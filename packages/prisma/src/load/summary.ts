// Load summed per logical shard in the database: one statement per database over a span of its
// clock (sum-sql.ts), from the windows not yet rolled up and the rollups, whatever the number of
// routers and windows, pro-rating only the windows across the span's
// edges (`windowShare`'s rule), latency sketches merged bucket by bucket and heavy hitters merged as
// `mergeTopKeys` merges them. The reader gets one row per shard, so its memory and time stay flat.
import { ShardIdentifier } from "@shardkit/id";
import { windowShare, windowsWithin } from "./figure.js";
import { type LoadQueryClient, queryWithoutJit } from "./no-jit.js";
import { type ShardLoadSummary, type ShardLoadWindow, summarizeLoad } from "./read.js";
import { LatencySketch, SKETCH_ALPHA, SKETCH_MIN_MS, type SketchData, storedQuantiles } from "./sketch.js";
import { missingLoadTable } from "./sql.js";
import { SUM_KEPT, SUM_LOAD, SUM_WINDOWS } from "./sum-sql.js";
import { mergeTopKeys, type TopKey } from "./top-keys.js";

/** A router whose windows were summed: its last measured clock skew (its clock minus the database's). */
export interface LoadRouter {
  router: string;
  windows: number;
  /** The end of its last window summed (the database's clock). */
  lastSeen: Date;
  /** Its clock minus the database's (ms, > 0: ahead) at its last flush; null for windows written without its clock. */
  skewMs: number | null;
}

/** Each shard's load over a span of one database's clock (`sumShardLoad`), or of several merged. */
export interface LoadSum {
  /** The span summed, by the database's clock. */
  from: Date;
  to: Date;
  /** Summed per shard, in shard order (`sketch` set). */
  shards: ShardLoadSummary[];
  /** The median length of the windows summed (ms; the resolution read when all were rolled up), null without any. */
  typicalWindowMs: number | null;
  /**
   * The resolution of the rollups read with the windows not yet rolled up (ms: 10 s, 1 min or 10 min,
   * `LOAD_RESOLUTIONS`); undefined for a sum of windows in memory.
   */
  resolutionMs?: number;
  /** Calls, writes and database time per bucket of `bucketMs` since the epoch (`bucket * bucketMs`). */
  series: { bucket: number; calls: number; writes: number; dbMs: number }[];
  routers: LoadRouter[];
}

export interface SumShardLoadOptions {
  /** The span's end (default: the database's `now()`). */
  until?: Date;
  /** Its start, or... */
  since?: Date;
  /** ...its length (ms, default an hour) before `until`. */
  spanMs?: number;
  /** Heavy hitters kept per shard (default 16). */
  topKeys?: number;
  /** The series' bucket (ms); none without. */
  bucketMs?: number;
}

/**
 * Each logical shard's load stored on one database over a span of its clock (by default the last
 * hour up to its `now()`), summed there: what `readShardLoad` + `windowsWithin` + `summarizeLoad`
 * give, in one row per shard. A database no router has flushed to yet has none.
 */
export async function sumShardLoad(
  client: LoadQueryClient,
  options: SumShardLoadOptions = {},
): Promise<LoadSum> {
  let rows: unknown;
  const sum = (sql: string): Promise<unknown> =>
    queryWithoutJit(
      client,
      sql,
      options.since?.toISOString() ?? null,
      options.spanMs ?? 3_600_000,
      options.until?.toISOString() ?? null,
      options.topKeys ?? 16,
      options.bucketMs ?? null,
    );
  // Set up by an earlier version, no router of this one has rolled up there yet: without the
  // horizons (each resolution taken as kept from the span's end), or its windows only.
  const earlier = (error: unknown): Promise<unknown> => {
    const message = String((error as { message?: unknown })?.message);
    if (/relation "[^"]*ShardLoadRollup" does not exist/.test(message)) return sum(SUM_WINDOWS);
    if (/relation "[^"]*ShardLoadHorizon" does not exist/.test(message))
      return sum(SUM_KEPT).then(undefined, earlier);
    return Promise.reject(error);
  };
  try {
    rows = await sum(SUM_LOAD).then(undefined, earlier);
  } catch (error) {
    if (!missingLoadTable(error)) throw error;
    const to = options.until ?? new Date();
    const from = options.since ?? new Date(to.getTime() - (options.spanMs ?? 3_600_000));
    return { from, to, shards: [], typicalWindowMs: null, series: [], routers: [] };
  }
  const row = (rows as Record<string, unknown>[])[0]!;
  const shards = (json(row.shards) as Record<string, unknown>[]).map(shardOf);
  return {
    from: new Date(Number(row.since_ms)),
    to: new Date(Number(row.until_ms)),
    shards,
    typicalWindowMs: row.typical_ms === null ? null : Number(row.typical_ms),
    resolutionMs: Number(row.tier_ms),
    series: (json(row.series) as number[][]).map(([bucket, calls, writes, dbMs]) => ({
      bucket: Number(bucket),
      calls: Number(calls),
      writes: Number(writes),
      dbMs: Number(dbMs),
    })),
    routers: (json(row.routers) as Record<string, unknown>[]).map((r) => ({
      router: String(r.router),
      windows: Number(r.windows),
      lastSeen: new Date(Number(r.last)),
      skewMs: r.skewMs === null || r.skewMs === undefined ? null : Number(r.skewMs),
    })),
  };
}

const json = (v: unknown): unknown => (typeof v === "string" ? JSON.parse(v) : v);

function shardOf(r: Record<string, unknown>): ShardLoadSummary {
  const shard = ShardIdentifier.fromBits(Number(r.shard));
  const sketch: SketchData = {
    alpha: SKETCH_ALPHA,
    min: SKETCH_MIN_MS,
    buckets: (r.sketch as [number, number][]).map(([i, n]) => [Number(i), Number(n)]),
  };
  const configs = (r.configs as string[]).slice().sort();
  return withQuantiles({
    shard,
    key: shard.key,
    calls: Number(r.calls),
    writes: Number(r.writes),
    rowsWritten: Number(r.rows),
    dbMs: Number(r.dbMs),
    p50: undefined,
    p95: undefined,
    p99: undefined,
    top: (r.top as TopKey[]).map((t) => ({ key: t.key, count: Number(t.count), error: Number(t.error) })),
    from: new Date(Number(r.from)),
    to: new Date(Number(r.to)),
    windows: Number(r.windows),
    routers: (r.routers as string[]).slice().sort(),
    configs,
    mixedConfigs: configs.length > 1,
    sketch,
  });
}

function withQuantiles(s: ShardLoadSummary): ShardLoadSummary {
  const [p50, p95, p99] = s.sketch ? storedQuantiles(s.sketch, [0.5, 0.95, 0.99]) : [];
  return { ...s, p50, p95, p99 };
}

/**
 * Sums of several databases (a shard's windows stay where they were written, so a shard that moved
 * has windows on both) merged per shard: counts added, sketches merged, heavy hitters merged
 * (`mergeTopKeys`, `topKeys` default 16), routers and configurations joined.
 */
export function mergeShardLoad(sums: readonly LoadSum[], topKeys = 16): ShardLoadSummary[] {
  const byShard = new Map<number, ShardLoadSummary[]>();
  for (const sum of sums)
    for (const s of sum.shards) {
      const list = byShard.get(s.shard.bits);
      if (list) list.push(s);
      else byShard.set(s.shard.bits, [s]);
    }
  return [...byShard.entries()]
    .sort(([x], [y]) => x - y)
    .map(([, list]) => {
      if (list.length === 1) return list[0]!;
      const sketch = new LatencySketch();
      for (const s of list) {
        const one = s.sketch ? LatencySketch.from(s.sketch) : null;
        if (one) sketch.merge(one);
      }
      const configs = [...new Set(list.flatMap((s) => s.configs))].sort();
      return withQuantiles({
        ...list[0]!,
        calls: sum(list, (s) => s.calls),
        writes: sum(list, (s) => s.writes),
        rowsWritten: sum(list, (s) => s.rowsWritten),
        dbMs: sum(list, (s) => s.dbMs),
        windows: sum(list, (s) => s.windows),
        from: new Date(Math.min(...list.map((s) => s.from.getTime()))),
        to: new Date(Math.max(...list.map((s) => s.to.getTime()))),
        top: mergeTopKeys(
          list.map((s) => s.top),
          topKeys,
        ),
        routers: [...new Set(list.flatMap((s) => s.routers))].sort(),
        configs,
        mixedConfigs: configs.length > 1,
        sketch: sketch.toJSON(),
      });
    });
}

const sum = <T>(list: readonly T[], f: (t: T) => number) => list.reduce((a, t) => a + f(t), 0);

/**
 * What `sumShardLoad` sums in the database, over windows in memory: the windows inside
 * `[from, to)` (`windowsWithin`) summed per shard (`summarizeLoad`), the series per `bucketMs`, the
 * routers seen with their last skew.
 */
export function sumWindows(
  windows: readonly ShardLoadWindow[],
  options: { from: number; to: number; topKeys?: number; bucketMs?: number },
): LoadSum {
  const { from, to, bucketMs } = options;
  const inside = windows.filter((w) => windowShare(w.windowStart.getTime(), w.windowMs, from, to) > 0);
  const series = new Map<number, { bucket: number; calls: number; writes: number; dbMs: number }>();
  const routers = new Map<string, LoadRouter>();
  for (const w of inside) {
    const start = w.windowStart.getTime();
    const end = start + w.windowMs;
    const r = routers.get(w.router) ?? {
      router: w.router,
      windows: 0,
      lastSeen: new Date(end),
      skewMs: null,
    };
    r.windows++;
    if (end >= r.lastSeen.getTime()) {
      r.lastSeen = new Date(end);
      if (w.skewMs !== undefined && w.skewMs !== null) r.skewMs = w.skewMs;
    }
    routers.set(w.router, r);
    if (!bucketMs) continue;
    const last = Math.min(Math.floor(Math.max(end - 1, start) / bucketMs), Math.floor(to / bucketMs));
    for (let b = Math.max(Math.floor(start / bucketMs), Math.floor(from / bucketMs)); b <= last; b++) {
      const share = w.windowMs > 0 ? windowShare(start, w.windowMs, b * bucketMs, (b + 1) * bucketMs) : 1;
      const e = series.get(b) ?? { bucket: b, calls: 0, writes: 0, dbMs: 0 };
      e.calls += w.calls * share;
      e.writes += w.writes * share;
      e.dbMs += w.dbMs * share;
      series.set(b, e);
    }
  }
  const lengths = inside.map((w) => w.windowMs).sort((x, y) => x - y);
  return {
    from: new Date(from),
    to: new Date(to),
    shards: summarizeLoad(windowsWithin(inside, from, to), { topKeys: options.topKeys ?? 16 }),
    typicalWindowMs: lengths.length > 0 ? lengths[Math.ceil(lengths.length / 2) - 1]! : null,
    series: [...series.values()].sort((x, y) => x.bucket - y.bucket),
    routers: [...routers.values()].sort((x, y) => (x.router < y.router ? -1 : x.router > y.router ? 1 : 0)),
  };
}

/** A router whose clock differs from its databases' by more than this is named (`skewedRouters`). */
export const CLOCK_SKEW_LIMIT_MS = 2_000;

/**
 * The routers of `sums` whose clock was more than `limitMs` off a database's at their last flush
 * (their windows are stamped by the database's clock all the same: counted where their calls went),
 * most skewed first, each once (its last flush over every database).
 */
export function skewedRouters(sums: readonly LoadSum[], limitMs = CLOCK_SKEW_LIMIT_MS): LoadRouter[] {
  const last = new Map<string, LoadRouter>();
  for (const sum of sums)
    for (const r of sum.routers) {
      const seen = last.get(r.router);
      if (r.skewMs !== null && (!seen || r.lastSeen > seen.lastSeen)) last.set(r.router, r);
    }
  return [...last.values()]
    .filter((r) => Math.abs(r.skewMs!) > limitMs)
    .sort((x, y) => Math.abs(y.skewMs!) - Math.abs(x.skewMs!));
}

/** "router h:1:ab's clock is 1 h 0 min ahead of its database's" */
export function describeSkew(r: LoadRouter): string {
  const exact = Math.abs(r.skewMs ?? 0);
  // To the second (a flush's own latency is in the measure), to the minute past an hour.
  const ms = exact >= 3_600_000 ? Math.round(exact / 60_000) * 60_000 : Math.round(exact / 1000) * 1000;
  const amount =
    ms >= 3_600_000
      ? `${Math.floor(ms / 3_600_000)} h ${(ms % 3_600_000) / 60_000} min`
      : ms >= 60_000
        ? `${Math.floor(ms / 60_000)} min ${(ms % 60_000) / 1000} s`
        : `${(exact / 1000).toFixed(1)} s`;
  return `router ${r.router}'s clock is ${amount} ${(r.skewMs ?? 0) > 0 ? "ahead of" : "behind"} its database's`;
}
