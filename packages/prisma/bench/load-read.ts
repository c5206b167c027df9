// `pnpm exec tsx --expose-gc bench/load-read.ts` (in packages/prisma): reading load at fleet size,
// as ratios against a small fleet read in the same run. Each fleet holds an hour of 10 s windows
// per router and shard (each with a 4-bucket latency sketch and 4 heavy hitters), written straight
// into `shardkit."ShardLoad"`:
//
//   small   64 shards on 1 database, 1 router:             23,040 windows
//   large   1,024 shards on 8 databases, 16 routers:  5,898,240 windows
//
// A read is what the balancer and the dashboard do: `sumShardLoad` on every database at once, then
// `mergeShardLoad`. Figures: the read's time (median of BENCH_ROUNDS, default 3) over the last
// 5 minutes (the default window) and over the whole hour, and the reader's heap at its peak during
// the read above the heap before it. The windows' way (`readShardLoad` + `summarizeLoad`, every
// window into the reader) is measured on the small fleet only: on the large one it does not fit.
import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import { readShardLoad, summarizeLoad, windowsWithin } from "../src/index.js";
import { ROLLUP_TABLE } from "../src/load/rollup.js";
import { CREATE_LOAD_TABLE } from "../src/load/schema.js";
import { LOAD_TABLE } from "../src/load/sql.js";
import { mergeShardLoad, sumShardLoad } from "../src/load/summary.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HOUR = 3_600_000;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

interface Fleet {
  label: string;
  names: string[];
  clients: PrismaClient[];
}

const GENERATE = `INSERT INTO ${LOAD_TABLE}
  (shard, window_start, window_ms, router, router_start, calls, writes, rows_written, db_ms, sketch, top, config)
SELECT s, t, 10000, 'router-' || r, t, c, c / 10, c / 5, c * 1.5,
  jsonb_build_object('alpha', 0.02, 'min', 0.001, 'buckets', jsonb_build_array(
    jsonb_build_array(290 + s % 7, c / 4), jsonb_build_array(300 + w % 5, c / 4),
    jsonb_build_array(320 + r % 3, c / 4), jsonb_build_array(360, c - 3 * (c / 4)))),
  jsonb_build_array(
    jsonb_build_object('key', 'k' || s || 'a', 'count', c / 4, 'error', 0),
    jsonb_build_object('key', 'k' || s || 'b', 'count', c / 8, 'error', 0),
    jsonb_build_object('key', 'k' || (w % 9), 'count', 2, 'error', 0),
    jsonb_build_object('key', 'k' || (r % 5), 'count', 1, 'error', 0)),
  'bench'
FROM unnest($1::int[]) s, generate_series(0, $2::int - 1) r, generate_series(0, 359) w,
  LATERAL (SELECT now() - (w + 1) * interval '10 seconds' AS t, 10 + (s * 7 + w + r) % 50 AS c) x`;

async function makeFleet(label: string, databases: number, shards: number, routers: number): Promise<Fleet> {
  const names = Array.from({ length: databases }, (_, i) => `sk_bench_loadread_${label}_${i}_${process.pid}`);
  const urls = await Promise.all(names.map((n) => createDatabase(MAIN_PORT, n)));
  const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
  for (let d = 0; d < databases; d++) {
    const client = clients[d]!;
    for (const ddl of CREATE_LOAD_TABLE) await client.$executeRawUnsafe(ddl);
    const mine = Array.from({ length: shards }, (_, i) => i).filter((i) => i % databases === d);
    await client.$executeRawUnsafe(GENERATE, mine, routers);
    await client.$executeRawUnsafe(`VACUUM ANALYZE ${LOAD_TABLE}`);
  }
  return { label, names, clients };
}

/** `read()`'s median time and its peak heap above the heap before it. */
async function measure(read: () => Promise<unknown>): Promise<{ ms: number; heap: number }> {
  const times: number[] = [];
  let heap = 0;
  for (let i = 0; i < ROUNDS; i++) {
    gc();
    const base = process.memoryUsage().heapUsed;
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().heapUsed);
    }, 2);
    const started = performance.now();
    const result = await read();
    times.push(performance.now() - started);
    peak = Math.max(peak, process.memoryUsage().heapUsed);
    clearInterval(sampler);
    heap = Math.max(heap, peak - base);
    if (!result) throw new Error("no result");
  }
  times.sort((x, y) => x - y);
  return { ms: times[Math.floor(times.length / 2)]!, heap };
}

const summed = (fleet: Fleet, spanMs: number) => async () =>
  mergeShardLoad(await Promise.all(fleet.clients.map((c) => sumShardLoad(c, { spanMs }))));

const windowed = (fleet: Fleet, spanMs: number) => async () => {
  const now = Date.now();
  const windows = (
    await Promise.all(
      fleet.clients.map((c) => readShardLoad(c, { since: new Date(now - spanMs), overlapping: true })),
    )
  ).flat();
  return summarizeLoad(windowsWithin(windows, now - spanMs, now));
};

await ensureCluster("main", MAIN_PORT);
const fleets: Fleet[] = [];
try {
  const started = performance.now();
  const small = await makeFleet("small", 1, 64, 1);
  fleets.push(small);
  const large = await makeFleet("large", 8, 1024, 16);
  fleets.push(large);
  console.error(`fleets written in ${Math.round((performance.now() - started) / 1000)} s`);
  const rows: [string, string, { ms: number; heap: number }][] = [];
  for (const [span, spanMs] of [
    ["5 min", 300_000],
    ["1 h", HOUR],
  ] as const) {
    rows.push(["64 shards, 1 router (baseline)", span, await measure(summed(small, spanMs))]);
    rows.push(["1,024 shards, 16 routers", span, await measure(summed(large, spanMs))]);
    rows.push([
      "64 shards, 1 router, every window read (before)",
      span,
      await measure(windowed(small, spanMs)),
    ]);
  }
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  console.log("| fleet | span | read | x baseline | reader heap (peak) | x baseline |");
  console.log("|---|---|---|---|---|---|");
  for (const [label, span, m] of rows) {
    const base = rows.find(([l, s]) => s === span && l.endsWith("(baseline)"))![2];
    console.log(
      `| ${label} | ${span} | ${Math.round(m.ms)} ms | ${(m.ms / base.ms).toFixed(1)}x | ${mb(m.heap)} | ${(m.heap / Math.max(1, base.heap)).toFixed(1)}x |`,
    );
  }
} finally {
  for (const f of fleets) {
    await Promise.all(f.clients.map((c) => c.$disconnect()));
    for (const n of f.names) await dropDatabase(MAIN_PORT, n);
  }
}
