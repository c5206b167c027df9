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
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { LoadRecorder } from "../src/load/recorder.js";
import { rolloutSchema } from "../src/rollout.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3000);
const WARMUP = 1000;

await ensureCluster("main", MAIN_PORT);
const name = `sk_bench_load_${process.pid}`;
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
  const own = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }), errorFormat: "minimal" });
  clients.push(own);
  const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)];
  const registry = createShardRegistry({ shards: shards.map((shard) => ({ shard, client: own })) });
  const routed = (load: Parameters<typeof shardRouting>[0]["load"]) =>
    own.$extends(shardRouting({ registry, telemetry: false, load }));
  const on = routed({ intervalMs: 1000 });
  const off = routed(false);
  const control = routed(false);

  const ids = Array.from({ length: 500 }, (_, i) => ShardedId.generate("Customer", shards[i % 2]!) as string);
  await own.customer.createMany({ data: ids.map((id, i) => ({ id, name: `c${i}`, region: "eu" })) });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query("ANALYZE");
  await admin.end();

  type Finder = { customer: { findUnique(args: { where: { id: string } }): PromiseLike<unknown> } };
  const variants: { name: string; db: Finder }[] = [
    { name: "load on (default), flushing every 1 s", db: on },
    { name: "load: false", db: off },
    { name: "control: a second `load: false` extension", db: control },
    { name: "database's own client", db: own },
  ];
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < WARMUP; i++) {
    for (const v of variants) await v.db.customer.findUnique({ where: { id: ids[i % ids.length]! } });
  }
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
  }
  const flushed = await on.$shardLoad()!.flush();
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  const [loadOn, loadOff, ctl, plain] = samples.map(median) as [number, number, number, number];
  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  console.log(
    `\nLoad per shard: routed findUnique by id, median of ${ROUNDS} alternated calls per variant\n`,
  );
  console.log("| variant | median | vs load: false | vs own client |");
  console.log("|---|---|---|---|");
  for (const [label, value] of [
    [variants[0]!.name, loadOn],
    [variants[1]!.name, loadOff],
    [variants[2]!.name, ctl],
    [variants[3]!.name, plain],
  ] as const) {
    console.log(
      `| ${label} | ${us(value)} | ${(value / loadOff).toFixed(3)} | ${(value / plain).toFixed(3)} |`,
    );
  }
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
