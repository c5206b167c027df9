// Reading the load windows back from one database, and summing them per logical shard: what
// `shardkit balance` and a dashboard read, with nothing but each database's client.
import { ShardIdentifier } from "@shardkit/id";
import { type LoadQueryClient, queryWithoutJit } from "./no-jit.js";
import { LatencySketch, type SketchData } from "./sketch.js";
import { missingLoadTable, READ_LOAD } from "./sql.js";
import { mergeTopKeys, type TopKey } from "./top-keys.js";

/** One router's counts for one logical shard over one window (a row of `shardkit."ShardLoad"`). */
export interface ShardLoadWindow {
  shard: ShardIdentifier;
  windowStart: Date;
  /** The window's length (longer than `intervalMs` when it carries counts a failed flush kept). */
  windowMs: number;
  /** The router that counted it: `host:pid:random`. */
  router: string;
  calls: number;
  writes: number;
  rowsWritten: number;
  /** Time in the database (ms); a call over several shards of one database split between them. */
  dbMs: number;
  /** The latency sketch (see `LatencySketch`): merge with `LatencySketch.from`. */
  sketch: SketchData;
  /** Heaviest routing keys of the window (hashes unless the router had `plainKeys`). */
  top: TopKey[];
  /** A digest of the router's shard configuration (where each shard lives). */
  config: string;
  /** The router's clock minus the database's at the flush (ms); null for a window written without its clock. */
  skewMs?: number | null;
}

export interface ReadShardLoadOptions {
  /** Windows that started at or after this time... */
  since?: Date;
  /** ...or in the last `sinceMs` ms (default: the last hour). */
  sinceMs?: number;
  /** Windows that started before this time (default: no end). */
  until?: Date;
  /**
   * Also the windows that started earlier but end after `since` (a window a router kept while its
   * flushes failed grows until one succeeds): what a reader that pro-rates by overlap wants.
   */
  overlapping?: boolean;
}

/**
 * The load windows stored on one database (`client`: its own Prisma client, e.g.
 * `registry.databases[i].client`), oldest first: those not yet
 * rolled up (about the last 40 s; `sumShardLoad` reads the rollups too). A database no router has
 * flushed to yet has none: `[]`.
 */
export async function readShardLoad(
  client: LoadQueryClient,
  options: ReadShardLoadOptions = {},
): Promise<ShardLoadWindow[]> {
  const since = options.since ?? new Date(Date.now() - (options.sinceMs ?? 3_600_000));
  let rows: unknown;
  try {
    rows = await queryWithoutJit(
      client,
      READ_LOAD,
      since.toISOString(),
      options.until?.toISOString() ?? null,
      options.overlapping === true,
    );
  } catch (error) {
    if (missingLoadTable(error)) return [];
    throw error;
  }
  return (rows as Record<string, unknown>[]).map((r) => ({
    shard: ShardIdentifier.fromBits(Number(r.shard)),
    windowStart: r.window_start instanceof Date ? r.window_start : new Date(String(r.window_start)),
    windowMs: Number(r.window_ms),
    router: String(r.router),
    calls: Number(r.calls),
    writes: Number(r.writes),
    rowsWritten: Number(r.rows_written),
    dbMs: Number(r.db_ms),
    sketch: json(r.sketch) as SketchData,
    top: json(r.top) as TopKey[],
    config: String(r.config),
    skewMs: r.skew_ms === null || r.skew_ms === undefined ? null : Number(r.skew_ms),
  }));
}

const json = (v: unknown): unknown => (typeof v === "string" ? JSON.parse(v) : v);

/** One logical shard's load over the windows summarized. */
export interface ShardLoadSummary {
  shard: ShardIdentifier;
  /** `shard.key` ("0/3"). */
  key: string;
  calls: number;
  writes: number;
  rowsWritten: number;
  dbMs: number;
  /** Latency quantiles (ms, within 2%); undefined without calls. */
  p50: number | undefined;
  p95: number | undefined;
  p99: number | undefined;
  /** Heaviest routing keys over every window and router (merged space-saving counters). */
  top: TopKey[];
  /** From the start of the first window to the end of the last. */
  from: Date;
  to: Date;
  windows: number;
  routers: string[];
  /** Configuration digests seen; `mixedConfigs` when there is more than one (routers disagreed on where shards live). */
  configs: string[];
  mixedConfigs: boolean;
  /** The merged latency sketch the quantiles come from (merge sums of several databases with it). */
  sketch?: SketchData;
}

/**
 * Sums windows (of one database or several; any routers) per logical shard, in shard order:
 * counts added, sketches merged (quantiles of every call), heavy hitters merged (`topKeys`, default 16).
 */
export function summarizeLoad(
  windows: readonly ShardLoadWindow[],
  options: { topKeys?: number } = {},
): ShardLoadSummary[] {
  const k = options.topKeys ?? 16;
  const byShard = new Map<
    number,
    {
      s: ShardLoadSummary;
      sketch: LatencySketch;
      tops: TopKey[][];
      routers: Set<string>;
      configs: Set<string>;
    }
  >();
  for (const w of windows) {
    let e = byShard.get(w.shard.bits);
    if (!e) {
      e = {
        s: {
          shard: w.shard,
          key: w.shard.key,
          calls: 0,
          writes: 0,
          rowsWritten: 0,
          dbMs: 0,
          p50: undefined,
          p95: undefined,
          p99: undefined,
          top: [],
          from: w.windowStart,
          to: new Date(w.windowStart.getTime() + w.windowMs),
          windows: 0,
          routers: [],
          configs: [],
          mixedConfigs: false,
        },
        sketch: new LatencySketch(),
        tops: [],
        routers: new Set(),
        configs: new Set(),
      };
      byShard.set(w.shard.bits, e);
    }
    const s = e.s;
    s.calls += w.calls;
    s.writes += w.writes;
    s.rowsWritten += w.rowsWritten;
    s.dbMs += w.dbMs;
    s.windows++;
    if (w.windowStart < s.from) s.from = w.windowStart;
    const end = new Date(w.windowStart.getTime() + w.windowMs);
    if (end > s.to) s.to = end;
    const sketch = LatencySketch.from(w.sketch);
    if (sketch) e.sketch.merge(sketch);
    if (w.top.length > 0) e.tops.push(w.top);
    e.routers.add(w.router);
    e.configs.add(w.config);
  }
  return [...byShard.entries()]
    .sort(([x], [y]) => x - y)
    .map(([, e]) => ({
      ...e.s,
      p50: e.sketch.quantile(0.5),
      p95: e.sketch.quantile(0.95),
      p99: e.sketch.quantile(0.99),
      top: mergeTopKeys(e.tops, k),
      routers: [...e.routers].sort(),
      configs: [...e.configs].sort(),
      mixedConfigs: e.configs.size > 1,
      sketch: e.sketch.toJSON(),
    }));
}
