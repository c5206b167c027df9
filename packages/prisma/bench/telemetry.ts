// pnpm bench (in packages/prisma), or `pnpm exec tsx bench/telemetry.ts`: what OpenTelemetry costs
// a routed findUnique, each figure a ratio against a baseline measured in the same run. Calls
// alternate between the variants (each round all of them, in a shuffled order) so a noisy disk or
// CPU hits every variant alike; medians are reported, over BENCH_ROUNDS (default 3000) calls per
// variant after a warm-up.
//
//   default    `shardRouting({ registry })`: instrumentation present, no SDK registered (no-op API)
//   off        `shardRouting({ registry, telemetry: false })`
//   own        the database's own PrismaClient, no routing
//   recording  `telemetry: { tracerProvider, meterProvider }` with an in-memory SDK (for scale)
//   control    a second `telemetry: false` extension: the noise between two identical variants
//
// All of them share one PrismaClient (one pool); each routed variant is its own `$extends`.

import { MeterProvider } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { rolloutSchema } from "../src/rollout.js";
import { Telemetry } from "../src/telemetry.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3000);
const WARMUP = 1000;

await ensureCluster("main", MAIN_PORT);
const name = `sk_bench_otel_${process.pid}`;
const url = await createDatabase(MAIN_PORT, name);
const clients: PrismaClient[] = [];
try {
  await bench();
} finally {
  await Promise.all(clients.map((client) => client.$disconnect()));
  await dropDatabase(MAIN_PORT, name);
}

async function bench(): Promise<void> {
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: [{ name, adapter: new PrismaPg({ connectionString: url }) }],
    onProgress: () => {},
  });
  const client = () => {
    const c = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }), errorFormat: "minimal" });
    clients.push(c);
    return c;
  };
  const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)];
  const routedOn = (c: PrismaClient, telemetry?: Parameters<typeof shardRouting>[0]["telemetry"]) =>
    c.$extends(
      shardRouting({
        registry: createShardRegistry({ shards: shards.map((shard) => ({ shard, client: c })) }),
        ...(telemetry !== undefined ? { telemetry } : {}),
      }),
    );
  // Every variant runs on one PrismaClient (one engine, one pool): they differ only in the
  // extension, so a pool or connection that happens to be slower cannot pass for a cost.
  const own = client();
  const byDefault = routedOn(own);
  const off = routedOn(own, false);
  const control = routedOn(own, false);
  const exporter = new InMemorySpanExporter();
  const recording = routedOn(own, {
    tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    meterProvider: new MeterProvider(),
  });

  const ids = Array.from({ length: 500 }, () => ShardedId.generate("Customer", shards[1]!) as string);
  await own.customer.createMany({ data: ids.map((id, i) => ({ id, name: `c${i}`, region: "eu" })) });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query("ANALYZE");
  await admin.end();

  type Finder = { customer: { findUnique(args: { where: { id: string } }): PromiseLike<unknown> } };
  const variants: { name: string; db: Finder }[] = [
    { name: "default (no SDK registered)", db: byDefault },
    { name: "telemetry: false", db: off },
    { name: "database's own client", db: own },
    { name: "recording (in-memory SDK)", db: recording },
    { name: "control: a second `telemetry: false` extension", db: control },
  ];
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < WARMUP; i++) {
    for (const v of variants) await v.db.customer.findUnique({ where: { id: ids[i % ids.length]! } });
  }
  exporter.reset();
  // Each round runs every variant once, in a shuffled order (seeded, so runs are comparable): a
  // fixed rotation would always put the same variant after the recording one and charge it for the
  // SDK's leftover work (garbage, export).
  let seed = 42;
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const order = variants.map((_, j) => j);
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = order.length - 1; k > 0; k--) {
      const r = Math.floor(random() * (k + 1));
      [order[k], order[r]] = [order[r]!, order[k]!];
    }
    for (const j of order) {
      const start = performance.now();
      await variants[j]!.db.customer.findUnique({ where: { id: ids[i % ids.length]! } });
      samples[j]!.push(performance.now() - start);
    }
    if (i % 500 === 0) exporter.reset();
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  const [dflt, noTelemetry, plain, rec, ctl] = samples.map(median) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  console.log(`\nOpenTelemetry: routed findUnique by id, median of ${ROUNDS} alternated calls per variant\n`);
  console.log("| variant | median | vs telemetry: false | vs own client |");
  console.log("|---|---|---|---|");
  for (const [label, value] of [
    [variants[0]!.name, dflt],
    [variants[1]!.name, noTelemetry],
    [variants[2]!.name, plain],
    [variants[3]!.name, rec],
    [variants[4]!.name, ctl],
  ] as const) {
    console.log(
      `| ${label} | ${us(value)} | ${(value / noTelemetry).toFixed(3)} | ${(value / plain).toFixed(3)} |`,
    );
  }
  // What the default adds to a call when no SDK is registered: the provider check, in-process.
  const check = new Telemetry(undefined);
  const N = 2_000_000;
  let on = 0;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) if (check.on()) on++;
  const ns = ((performance.now() - t0) * 1e6) / N;
  console.log(
    `\nThe default's per-call check with no SDK registered: ${ns.toFixed(1)} ns (${on} of ${N} on), ` +
      `${((ns / 1e6 / noTelemetry) * 100).toFixed(4)}% of the telemetry: false median`,
  );
}
