// `pnpm exec tsx --expose-gc bench/load-read.ts` (in packages/prisma): reading load at fleet size,
// as ratios against a small fleet read in the same run. Each fleet holds what routers leave behind
// them in steady state, written in bulk with SQL: a day of rollups merged across routers (10 s
// buckets for the last hour, 1 min and 10 min buckets for the day, each with a 4-bucket latency
// sketch, 8 heavy hitters and the routers' names) and the windows not yet rolled up (the last
// minute of 10 s windows of every router, with 4 heavy hitters each), and each resolution's horizon:
//
//   small   64 shards on 1 database, 1 router
//   large   1,024 shards on 8 databases, 16 routers
//
// A read is what the balancer and the dashboard do: `sumShardLoad` on every database at once, then
// `mergeShardLoad`. Figures: the read's time (median of BENCH_ROUNDS, default 3) over the last
// 5 minutes (the default window), hour and day, and the reader's heap at its peak during the read
// above the heap before it. Then one rollup on every database at once (the windows past the lag:
// 30 s of every router's windows), as a router's flush runs it.
import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import { HORIZON_TABLE, ROLLUP_TABLE, rollUpLoad } from "../src/load/rollup.js";
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

/** The windows not yet rolled up (the last 40 s: a rollup moves those that ended 30 s ago): `$1` shards, `$2` routers. */
const WINDOWS = `INSERT INTO ${LOAD_TABLE}
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
FROM unnest($1::int[]) s, generate_series(0, $2::int - 1) r, generate_series(0, 3) w,
  LATERAL (SELECT now() - (w + 1) * interval '10 seconds' AS t, 10 + (s * 7 + w + r) % 50 AS c) x`;

/** A day of rollups up to the windows above (a minute ago): `$1` shards, `$2` routers. */
const ROLLUPS = `INSERT INTO ${ROLLUP_TABLE} (bucket_ms, bucket_start, shard, data_start, data_end, calls, writes,
  rows_written, db_ms, windows, sketch, top, routers, configs)
SELECT t.ms, b, s, b, LEAST(b + t.ms * interval '1 ms', now() - interval '1 minute'), c, c / 10, c / 5, c * 1.5,
  $2::int * t.ms / 10000,
  jsonb_build_object('alpha', 0.02, 'min', 0.001, 'buckets', jsonb_build_array(
    jsonb_build_array(290 + s % 7, c / 4), jsonb_build_array(300 + n % 5, c / 4),
    jsonb_build_array(320 + n % 3, c / 4), jsonb_build_array(360, c - 3 * (c / 4)))),
  (SELECT jsonb_agg(jsonb_build_object('key', 'k' || s || '-' || k, 'count', c / (4 + k), 'error', k) ORDER BY k)
   FROM generate_series(0, 7) k),
  ARRAY(SELECT 'router-' || r FROM generate_series(0, $2::int - 1) r), ARRAY['bench']
FROM unnest($1::int[]) s, (VALUES (10000, 3600000), (60000, 86400000), (600000, 86400000), (3600000, 86400000)) t(ms, keep),
  LATERAL generate_series(date_bin(t.ms * interval '1 ms', now() - t.keep * interval '1 ms', 'epoch'),
    now() - interval '1 minute', t.ms * interval '1 ms') WITH ORDINALITY g(b, n),
  LATERAL (SELECT ($2::int * t.ms / 10000 * (10 + (s * 7 + n) % 50))::float8 AS c) x`;

/** Each resolution complete from the start of its buckets above, as its rollups would have recorded. */
const HORIZONS = `INSERT INTO ${HORIZON_TABLE} (bucket_ms, complete_from)
SELECT t.ms, date_bin(t.ms * interval '1 ms', now() - t.keep * interval '1 ms', 'epoch')
FROM (VALUES (10000, 3600000), (60000, 86400000), (600000, 86400000), (3600000, 86400000)) t(ms, keep)`;

async function makeFleet(label: string, databases: number, shards: number, routers: number): Promise<Fleet> {
  const names = Array.from({ length: databases }, (_, i) => `sk_bench_loadread_${label}_${i}_${process.pid}`);
  const urls = await Promise.all(names.map((n) => createDatabase(MAIN_PORT, n)));
  const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
  for (let d = 0; d < databases; d++) {
    const client = clients[d]!;
    for (const ddl of CREATE_LOAD_TABLE) await client.$executeRawUnsafe(ddl);
    const mine = Array.from({ length: shards }, (_, i) => i).filter((i) => i % databases === d);
    await client.$executeRawUnsafe(WINDOWS, mine, routers);
    await client.$executeRawUnsafe(ROLLUPS, mine, routers);
    await client.$executeRawUnsafe(HORIZONS);
    await client.$executeRawUnsafe(`VACUUM ANALYZE ${LOAD_TABLE}`);
    await client.$executeRawUnsafe(`VACUUM ANALYZE ${ROLLUP_TABLE}`);
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
    ["24 h", 24 * HOUR],
  ] as const) {
    rows.push(["64 shards, 1 router (baseline)", span, await measure(summed(small, spanMs))]);
    rows.push(["1,024 shards, 16 routers", span, await measure(summed(large, spanMs))]);
  }
  const resolutions = await Promise.all(
    [300_000, HOUR, 24 * HOUR].map(
      async (spanMs) => (await sumShardLoad(large.clients[0]!, { spanMs })).resolutionMs,
    ),
  );
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  console.log(`resolutions read (5 min, 1 h, 24 h): ${resolutions.map((r) => `${r! / 1000} s`).join(", ")}`);
  console.log("| fleet | span | read | x baseline | reader heap (peak) | x baseline |");
  console.log("|---|---|---|---|---|---|");
  for (const [label, span, m] of rows) {
    const base = rows.find(([l, s]) => s === span && l.endsWith("(baseline)"))![2];
    console.log(
      `| ${label} | ${span} | ${Math.round(m.ms)} ms | ${(m.ms / base.ms).toFixed(1)}x | ${mb(m.heap)} | ${(m.heap / Math.max(1, base.heap)).toFixed(1)}x |`,
    );
  }
  // One rollup per database, all at once, as routers' flushes run them: 30 s of every router's windows.
  const rolled: { ms: number; moved: number }[] = [];
  for (const fleet of [small, large]) {
    const started = performance.now();
    const moved = await Promise.all(fleet.clients.map((c) => rollUpLoad(c)));
    rolled.push({ ms: performance.now() - started, moved: moved.reduce((a, n) => a + n, 0) });
  }
  const [few, many] = rolled as [(typeof rolled)[0], (typeof rolled)[0]];
  console.log(
    `rollup: ${many.moved} windows in ${Math.round(many.ms)} ms (${(many.ms / few.ms).toFixed(1)}x the baseline's ${few.moved} in ${Math.round(few.ms)} ms)`,
  );
} finally {
  for (const f of fleets) {
    await Promise.all(f.clients.map((c) => c.$disconnect()));
    for (const n of f.names) await dropDatabase(MAIN_PORT, n);
  }
}
