// `pnpm exec tsx bench/load.ts` (in packages/prisma): what counting load per shard costs a routed
// findUnique, as a ratio against `load: false` measured in the same run. Each round runs every
// variant once in a shuffled order (seeded) so a noisy disk or CPU hits them alike; medians over
// BENCH_ROUNDS (default 3000) calls per variant after a warm-up.
//
//   load on    `shardRouting({ registry, telemetry: false })`: load counting on (the default),
//              flushing every second here (ten times as often as the default) to the database
//   load off   `load: false`
//   control    a second `load: false` extension: the noise between two identical variants
//   own        the database's own PrismaClient, no routing
//
// All of them share one PrismaClient (one pool); each routed variant is its own `$extends`.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { LoadRecorder } from "../src/load/recorder.js";
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

await onBenchDatabase("load", bench);

async function bench({ url, clients }: BenchDatabase): Promise<void> {
  const own = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }), errorFormat: "minimal" });
  clients.push(own);
  const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)];
  const registry = createShardRegistry({ shards: shards.map((shard) => ({ shard, client: own })) });
  const routed = (load: Parameters<typeof shardRouting>[0]["load"]) =>
    own.$extends(shardRouting({ registry, telemetry: false, load }));
  const on = routed({ intervalMs: 1000 });
  const off = routed(false);
  const control = routed(false);

  const ids = await seedCustomers(own, url, (i) => shards[i % 2]!);
  const variants = [
    findUniqueBy(ids, "load on (default), flushing every 1 s", on),
    findUniqueBy(ids, "load: false", off),
    findUniqueBy(ids, "control: a second `load: false` extension", control),
    findUniqueBy(ids, "database's own client", own),
  ];
  const medians = await measureShuffled(variants, WARMUP, ROUNDS);
  const flushed = await on.$shardLoad()!.flush();
  const loadOff = medians[1]!;
  printMedians(
    `Load per shard: routed findUnique by id, median of ${ROUNDS} alternated calls per variant`,
    variants,
    medians,
    [
      { index: 1, vs: "load: false" },
      { index: 3, vs: "own client" },
    ],
  );
  console.log(`\nlast flush: ${flushed.map((f) => `${f.database} ${f.status} (${f.rows} rows)`).join(", ")}`);

  // The counting alone, in-process: one call noted on its shard, with its routing key.
  const recorder = new LoadRecorder(
    { layout: registry, databases: registry.databases, keysOf: () => ["id"] },
    { intervalMs: 2 ** 30, retainMs: 1e9, topKeys: 16, plainKeys: false, keySalt: "x", deadlineMs: 1000 },
  );
  const one = [shards[1]!];
  const N = 2_000_000;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    recorder.note(
      one,
      "findUnique",
      0.3,
      null,
      true,
      recorder.keyOf("Customer", { where: { id: ids[i % 500]! } }),
    );
  }
  const ns = ((performance.now() - t0) * 1e6) / N;
  await recorder.close().catch(() => {});
  console.log(
    `counting one call in-process (keyOf + note): ${ns.toFixed(0)} ns, ${((ns / 1e6 / loadOff) * 100).toFixed(3)}% of the load: false median`,
  );
}
