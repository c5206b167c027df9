// Load summed per shard in the database gives what the same windows give summed in memory (the one
// rule of `windowShare` at both edges of the span, sketches, heavy hitters with their floors, the
// series per bucket), and sums of two databases merge per shard.
import { ShardIdentifier } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import type { PrismaClient } from "../../test/generated/prisma/client.js";
import { loadRows, loadTableDatabases } from "../../test/load-rows.js";
import type { ShardLoadWindow } from "./read.js";
import { LatencySketch } from "./sketch.js";
import { FLUSH_LOAD } from "./sql.js";
import { mergeShardLoad, sumShardLoad, sumWindows } from "./summary.js";

const names = [`ld_sum_a_${process.pid}`, `ld_sum_b_${process.pid}`];

const databases = loadTableDatabases(names);

const UNTIL = Date.parse("2026-01-01T12:00:00Z");
const SPAN = 120_000;
const SINCE = UNTIL - SPAN;

/** A deterministic spread of windows: 3 shards x 3 routers, 10 s windows over 3 minutes, some across the span's edges. */
function windows(seed: number): ShardLoadWindow[] {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  const out: ShardLoadWindow[] = [];
  for (const shard of ["0/0", "0/1", "3/7"])
    for (const router of ["r1", "r2", "r3"])
      for (let start = SINCE - 35_000 + Math.floor(next() * 5_000); start < UNTIL + 5_000; ) {
        // Mostly 10 s; now and then a long one (a router kept it while its flushes failed).
        const length = next() < 0.1 ? 35_000 : 10_000;
        const calls = 1 + Math.floor(next() * 500);
        const sketch = new LatencySketch();
        for (let i = 0; i < 4; i++) sketch.record(0.5 + next() * 40, 1 + Math.floor(next() * calls));
        const keys = Array.from({ length: 1 + Math.floor(next() * 5) }, (_, i) => ({
          key: `k${Math.floor(next() * 8)}${i}`,
          count: 1 + Math.floor(next() * 50),
          error: Math.floor(next() * 3),
        }));
        const top = [...new Map(keys.map((k) => [k.key, k])).values()];
        out.push({
          shard: ShardIdentifier.parse(shard),
          windowStart: new Date(start),
          windowMs: length,
          router,
          calls,
          writes: Math.floor(calls / 3),
          rowsWritten: Math.floor(calls / 2),
          dbMs: calls * (1 + next()),
          sketch: sketch.toJSON(),
          top,
          config: router === "r3" ? "other" : "c",
        });
        start += length;
      }
  return out;
}

async function write(client: PrismaClient, list: readonly ShardLoadWindow[]) {
  await client.$executeRawUnsafe(FLUSH_LOAD, loadRows(list), new Date(0).toISOString());
}

const figures = (s: {
  key: string;
  calls: number;
  writes: number;
  rowsWritten: number;
  dbMs: number;
  windows: number;
  routers: string[];
  configs: string[];
  mixedConfigs: boolean;
  p50: number | undefined;
  p99: number | undefined;
  top: { key: string; count: number; error: number }[];
}) => ({
  key: s.key,
  calls: Math.round(s.calls * 1e6) / 1e6,
  writes: Math.round(s.writes * 1e6) / 1e6,
  rowsWritten: Math.round(s.rowsWritten * 1e6) / 1e6,
  dbMs: Math.round(s.dbMs * 1e4) / 1e4,
  windows: s.windows,
  routers: s.routers,
  configs: s.configs,
  mixedConfigs: s.mixedConfigs,
  p50: s.p50,
  p99: s.p99,
  top: s.top.map((t) => ({
    key: t.key,
    count: Math.round(t.count * 1e6) / 1e6,
    error: Math.round(t.error * 1e6) / 1e6,
  })),
});

describe("load summed per shard in the database", () => {
  it("gives what the same windows give in memory, with the span's edges pro-rated by one rule", async () => {
    const list = windows(7);
    await write(databases.clients[0]!, list);
    const sum = await sumShardLoad(databases.clients[0]!, {
      since: new Date(SINCE),
      until: new Date(UNTIL),
      topKeys: 4,
      bucketMs: 7_000,
    });
    const expected = sumWindows(list, { from: SINCE, to: UNTIL, topKeys: 4, bucketMs: 7_000 });
    expect(sum.shards.map(figures)).toEqual(expected.shards.map(figures));
    expect(sum.typicalWindowMs).toBe(expected.typicalWindowMs);
    expect(sum.routers).toEqual(expected.routers);
    expect(sum.shards.find((s) => s.key === "3/7")?.mixedConfigs).toBe(true);
    expect(sum.from.getTime()).toBe(SINCE);
    expect(sum.to.getTime()).toBe(UNTIL);
    expect(sum.typicalWindowMs).toBe(10_000);
    expect(sum.routers.map((r) => [r.router, r.skewMs])).toEqual([
      ["r1", null],
      ["r2", null],
      ["r3", null],
    ]);

    // The series: each window spread over the 7 s buckets it covers, from the span's first bucket.
    const round = (list: { bucket: number; calls: number; dbMs: number }[]) =>
      list.map((b) => [b.bucket, Math.round(b.calls * 1e6) / 1e6, Math.round(b.dbMs * 1e4) / 1e4]);
    expect(round(sum.series)).toEqual(round(expected.series));
    expect(sum.series[0]!.bucket).toBe(Math.floor(SINCE / 7_000));
  });

  it("sums of two databases merge per shard as the windows of both would", async () => {
    const second = windows(11).filter((w) => w.shard.key !== "3/7");
    await write(databases.clients[1]!, second);
    const span = { since: new Date(SINCE), until: new Date(UNTIL), topKeys: 100 };
    const merged = mergeShardLoad(
      await Promise.all(databases.clients.map((c) => sumShardLoad(c, span))),
      100,
    );
    const expected = sumWindows([...windows(7), ...second], { from: SINCE, to: UNTIL, topKeys: 100 }).shards;
    // With every key kept, merging sums is exact: the same counts, quantiles and keys.
    expect(merged.map(figures)).toEqual(expected.map(figures));
  });

  it("a database no router flushed to has no load", async () => {
    const sum = await sumShardLoad(
      {
        $queryRawUnsafe: () =>
          Promise.reject(Object.assign(new Error('relation "shardkit.ShardLoad" does not exist'), {})),
        $executeRawUnsafe: () => Promise.resolve(0),
        $transaction: (queries) => Promise.all(queries),
      },
      { spanMs: 1000 },
    );
    expect(sum.shards).toEqual([]);
  });
});
