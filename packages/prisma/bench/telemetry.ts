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
import { ShardIdentifier } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { Telemetry } from "../src/telemetry.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import {
  type BenchDatabase,
  findUniqueBy,
  measureShuffled,
  onBenchDatabase,
  printMedians,
  seedCustomers,
} from "./measure.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3000);
const WARMUP = 1000;

await onBenchDatabase("otel", bench);

async function bench({ url, clients }: BenchDatabase): Promise<void> {
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

  const ids = await seedCustomers(own, url, () => shards[1]!);
  const variants = [
    findUniqueBy(ids, "default (no SDK registered)", byDefault),
    findUniqueBy(ids, "telemetry: false", off),
    findUniqueBy(ids, "database's own client", own),
    findUniqueBy(ids, "recording (in-memory SDK)", recording),
    findUniqueBy(ids, "control: a second `telemetry: false` extension", control),
  ];
  // The spans the recording variant keeps are dropped every 500 rounds (untimed).
  const medians = await measureShuffled(variants, WARMUP, ROUNDS, (i) => {
    if (i % 500 === 0) exporter.reset();
  });
  const noTelemetry = medians[1]!;
  printMedians(
    `OpenTelemetry: routed findUnique by id, median of ${ROUNDS} alternated calls per variant`,
    variants,
    medians,
    [
      { index: 1, vs: "telemetry: false" },
      { index: 2, vs: "own client" },
    ],
  );
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
