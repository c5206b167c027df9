// Part of `pnpm bench` (in packages/prisma, after routing.ts): keyless reads scattered over three databases
// against the same read on one database holding every row, measured in the same run. Calls
// alternate between the two; medians are reported.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { rolloutSchema } from "../src/rollout.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 500);
const ROWS = 3000;
await ensureCluster("main", MAIN_PORT);
const names = ["a", "b", "c", "one"].map((k) => `sk_bench_scatter_${k}_${process.pid}`);
const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
await rolloutSchema({
  schema: new URL("../test/schema.prisma", import.meta.url).pathname,
  targets: urls.map((url, i) => ({ name: names[i]!, adapter: new PrismaPg({ connectionString: url }) })),
  onProgress: () => {},
});
const [a, b, c, one] = urls.map(
  (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }),
);
const shards = [0, 1, 2, 3, 4, 5].map((i) => ShardIdentifier.of(i >> 1, i & 1));
const registry = createShardRegistry({
  shards: shards.map((shard, i) => ({ shard, client: [a!, a!, b!, b!, c!, c!][i]! })),
});
const db = a!.$extends(shardRouting({ registry, keyless: "scatter" }));

const customers = Array.from({ length: ROWS }, (_, i) => ({
  id: ShardedId.generate("Customer", shards[i % shards.length]!) as string,
  name: `n${(i * 7919) % ROWS}`,
  region: ["eu", "mx", "us"][i % 3]!,
}));
for (const client of [a!, b!, c!]) {
  await client.customer.createMany({ data: customers.filter((r) => registry.clientFor(r.id) === client) });
}
await one!.customer.createMany({ data: customers });

type Reader = {
  customer: {
    findMany(a: any): PromiseLike<any[]>;
    count(a?: any): PromiseLike<number>;
    groupBy(a: any): PromiseLike<unknown>;
  };
};
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
async function measure(label: string, op: (r: Reader, i: number) => PromiseLike<unknown>) {
  const times = { one: [] as number[], scatter: [] as number[] };
  const order: [keyof typeof times, Reader][] = [
    ["one", one as unknown as Reader],
    ["scatter", db as unknown as Reader],
  ];
  for (let i = 0; i < ROUNDS + 50; i++) {
    for (const [name, reader] of i % 2 ? order : [...order].reverse()) {
      const t0 = performance.now();
      await op(reader, i);
      if (i >= 50) times[name].push(performance.now() - t0);
    }
  }
  const base = median(times.one);
  const s = median(times.scatter);
  console.log(
    `| ${label} | ${(base * 1000).toFixed(0)} µs (1.00) | ${(s * 1000).toFixed(0)} µs (${(s / base).toFixed(2)}) |`,
  );
}

console.log("| operation | one database, every row | scattered over 3 databases |");
console.log("|---|---|---|");
await measure("`findMany` orderBy name, take 20", (r) =>
  r.customer.findMany({ orderBy: { name: "asc" }, take: 20 }),
);
await measure("`findMany` orderBy name, skip 100, take 20", (r) =>
  r.customer.findMany({ orderBy: { name: "asc" }, skip: 100, take: 20 }),
);
await measure("`findMany` with a cursor, take 20", (r, i) =>
  r.customer.findMany({
    orderBy: { name: "asc" },
    cursor: { id: customers[i % ROWS]!.id },
    skip: 1,
    take: 20,
  }),
);
await measure("`count`", (r) => r.customer.count());
await measure("`groupBy` region, _count", (r) =>
  r.customer.groupBy({ by: ["region"], _count: { _all: true } }),
);

await registry.disconnect();
await one!.$disconnect();
for (const name of names) await dropDatabase(MAIN_PORT, name);
