// One window's counts per shard, as the recorder counts them and as they wait to be written (merged
// with later windows after a failed flush), and the names a router writes them under.
import { createHash, randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ShardLayout } from "../planner.js";
import { LatencySketch } from "./sketch.js";
import type { LoadRow } from "./sql.js";
import { mergeTopKeys, SpaceSaving, type TopKey } from "./top-keys.js";

/** One shard's counts in the window being counted. */
export class ShardCounts {
  calls = 0;
  writes = 0;
  rows = 0;
  dbMs = 0;
  readonly sketch = new LatencySketch();
  readonly top: SpaceSaving;
  constructor(k: number) {
    this.top = new SpaceSaving(k);
  }
}

/** One shard's counts taken from a window, as they wait to be written (merged with later ones after a failed flush). */
export interface Taken {
  calls: number;
  writes: number;
  rows: number;
  dbMs: number;
  sketch: LatencySketch;
  top: TopKey[];
}

/** A database's rows waiting to be written: from the start of the first window not yet written. */
export interface Batch {
  start: number;
  end: number;
  rows: Map<number, Taken>;
}

/**
 * A database's batch as sent, without the router's clock at the send (`sent_at`, added at each send):
 * sent again as it is, never changed, until a statement carrying it is known to have ended, or
 * `RESEND_FOR_MS` after `firstSent` (the router's monotonic clock at its first send: a step of its
 * wall clock neither shortens nor lengthens that).
 */
export interface Sent {
  start: number;
  firstSent: number;
  rows: Omit<LoadRow, "sent_at">[];
}

/** `batch` as the rows a flush sends first at `at` (monotonic), under its key: `router` and the batch's start by the router's clock. */
export function sentOf(batch: Batch, router: string, config: string, at: number): Sent {
  const windowStart = new Date(batch.start).toISOString();
  const windowMs = Math.min(Math.max(0, Math.round(batch.end - batch.start)), 2 ** 31 - 1);
  const rows: Sent["rows"] = [];
  for (const [bits, t] of batch.rows) {
    rows.push({
      shard: bits,
      window_start: windowStart,
      window_ms: windowMs,
      router,
      calls: t.calls,
      writes: t.writes,
      rows_written: t.rows,
      db_ms: t.dbMs,
      sketch: t.sketch.toJSON(),
      top: t.top,
      config,
    });
  }
  return { start: batch.start, firstSent: at, rows };
}

/** Per-process router id: host, pid and a random part (two routed clients of one process are two routers). */
export function routerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}

/**
 * A digest of the shard configuration (its databases and its shards), so windows from routers with
 * another configuration stand out. Not of which database holds which shard now: that changes with
 * every move, and routers opened before and after one have the same configuration.
 */
export function configDigest(layout: ShardLayout, names: readonly string[]): string {
  const databases = layout.databases.map((p) => names[p.index] ?? String(p.index)).sort();
  const shards = layout.databases.flatMap((p) => p.shards.map((s) => s.bits)).sort((x, y) => x - y);
  return createHash("sha256")
    .update(`${databases.join("\n")}\n--\n${shards.join(",")}`)
    .digest("hex")
    .slice(0, 16);
}

export function copy(sketch: LatencySketch): LatencySketch {
  const c = new LatencySketch();
  c.merge(sketch);
  return c;
}

export function merge(rows: Map<number, Taken>, bits: number, t: Taken, k: number): void {
  const m = rows.get(bits);
  if (!m) {
    rows.set(bits, t);
    return;
  }
  m.calls += t.calls;
  m.writes += t.writes;
  m.rows += t.rows;
  m.dbMs += t.dbMs;
  m.sketch.merge(t.sketch);
  m.top = mergeTopKeys([m.top, t.top], k);
}
