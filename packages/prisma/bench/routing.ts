// pnpm bench (in packages/prisma): the routing extension's overhead, as ratios against the shard's
// own client measured in the same run. Calls alternate between the variants (ABC, BCA, CAB, ...)
// so a noisy disk or CPU hits every variant alike; medians are reported.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { rolloutSchema } from "../src/rollout.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3000);
await ensureCluster("main", MAIN_PORT);
const names = [`sk_bench_a_${process.pid}`, `sk_bench_b_${process.pid}`];
const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
for (const url of urls) {
  // Routing overhead is what is measured, not the disk: commits need not wait for fsync.
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = off`);
  await admin.end();
}
await rolloutSchema({
  schema: new URL("../test/schema.prisma", import.meta.url).pathname,
  targets: urls.map((url, i) => ({ name: names[i]!, adapter: new PrismaPg({ connectionString: url }) })),
  onProgress: () => {},
});
const [a, b] = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
const four = createShardRegistry({
  shards: [
    { shard: ShardIdentifier.of(0, 0), client: a! },
    { shard: ShardIdentifier.of(0, 1), client: a! },
    { shard: ShardIdentifier.of(1, 0), client: b! },
    { shard: ShardIdentifier.of(1, 1), client: b! },
  ],
});
const single = createShardRegistry({
  shards: [0, 1, 2, 3].map((m) => ({ shard: ShardIdentifier.of(0, m), client: a! })),
});
const variants: Record<string, Client> = {
  "shard's own client": a!,
  "routed, 4 shards on 2 databases": a!.$extends(shardRouting({ registry: four })),
  "routed, single-database mode": a!.$extends(shardRouting({ registry: single })),
  "empty pass-through extension": a!.$extends({
    query: { $allModels: { $allOperations: ({ args, query }) => query(args) } },
  }),
};
type Client = {
  customer: { findUnique(args: any): PromiseLike<unknown>; create(args: any): PromiseLike<unknown> };
};

const shard = ShardIdentifier.of(0, 1);
const ids = Array.from({ length: 500 }, () => ShardedId.generate("Customer", shard));
await a!.customer.createMany({ data: ids.map((id, i) => ({ id, name: `c${i}`, region: "eu" })) });

async function measure(
  label: string,
  op: (client: Client, i: number) => PromiseLike<unknown>,
  set: Record<string, Client> = variants,
) {
  const entries = Object.entries(set) as [string, Client][];
  const samples = new Map<string, number[]>(entries.map(([name]) => [name, []]));
  for (let i = 0; i < 200; i++) for (const [, client] of entries) await op(client, i); // warm-up
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < entries.length; k++) {
      const [name, client] = entries[(i + k) % entries.length]!;
      const start = performance.now();
      await op(client, i);
      samples.get(name)!.push(performance.now() - start);
    }
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const base = median(samples.get(entries[0]![0])!);
  console.log(`\n${label} (${ROUNDS} calls each, interleaved)`);
  console.log("| variant | median | ratio |\n|---|---|---|");
  for (const [name, xs] of samples) {
    const m = median(xs);
    console.log(`| ${name} | ${(m * 1000).toFixed(0)} µs | ${(m / base).toFixed(3)} |`);
  }
}

const otherShard = ShardIdentifier.of(1, 1); // held by b, while the extension is installed on a
const otherIds = Array.from({ length: 500 }, () => ShardedId.generate("Customer", otherShard));
await b!.customer.createMany({ data: otherIds.map((id, i) => ({ id, name: `o${i}`, region: "mx" })) });

try {
  await measure("findUnique by id", (client, i) =>
    client.customer.findUnique({ where: { id: ids[i % ids.length]! } }),
  );
  await measure(
    "findUnique by id, shard on a database other than the one the extension is installed on",
    (client, i) => client.customer.findUnique({ where: { id: otherIds[i % otherIds.length]! } }),
    {
      "shard's own client": b!,
      "routed, 4 shards on 2 databases": variants["routed, 4 shards on 2 databases"]!,
    },
  );
  await measure("create", (client) =>
    client.customer.create({ data: { id: ShardedId.generate("Customer", shard), name: "n", region: "eu" } }),
  );
} finally {
  await four.disconnect();
  for (const name of names) await dropDatabase(MAIN_PORT, name);
}
