// How a scatter read's cost grows with the fleet: the same keyless reads over 1, 4, 16 and 64
// databases (16 logical shards each, so 64 databases hold 1024 shards) against the same read on one
// database holding every row, measured in the same run. Run: `pnpm exec tsx bench/scale-scatter.ts`
// in packages/prisma (BENCH_SIZES=1,4,16,64, BENCH_ROWS, BENCH_ROUNDS to change the run).
//
// Each size gets its own fleet and the same number of rows spread over the fleet's shards; the
// baseline database is reloaded with exactly those rows, and the bench checks that the scatter's
// answer equals the baseline's before timing anything. Both sides get an index on (name, id), so
// the baseline's top-20 is an index scan: the floor a scatter is compared with is a cheap query,
// not a sort that a scatter would split 64 ways.
//
// Figures per call (medians of interleaved calls, see measure.ts): wall time, and this process's
// CPU time (`process.cpuUsage`, user + system): the router's own cost, which the databases'
// parallelism does not hide. The baseline of `findMany` and `count` is the plain client of the one
// database; the baseline of `$scatterPage` is the routed client of the one database (a registry
// holding all 1024 shards there): the same API on one database. "By hand" is the floor under any
// scatter through Prisma: the legs' own queries sent at once, one per database, each through the
// database's PrismaClient, with no shardkit code at all.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { type Fleet, makeFleet } from "./fleet.js";
import { median } from "./measure.js";

const SIZES = (process.env.BENCH_SIZES ?? "1,4,16,64").split(",").map(Number);
const ROWS = Number(process.env.BENCH_ROWS ?? 16384);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const WARMUP = 30;
const PAGE = 20;

type Customer = { id: string; name: string; region: string };
interface Reader {
  customer: {
    findMany(a: unknown): PromiseLike<Customer[]>;
    count(a?: unknown): PromiseLike<number>;
  };
  $scatterPage(
    model: "customer",
    page: unknown,
  ): PromiseLike<{ rows: Customer[]; nextCursor: string | null }>;
}

const clients: PrismaClient[] = [];
const fleets: Fleet[] = [];
const open = (url: string) => {
  // Two connections per database: calls are one at a time, each leg needs one.
  const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) });
  clients.push(client);
  return client;
};
/** Both sides sort by (name, id) through an index: a top-N read is an index scan. */
const indexed = (client: PrismaClient) =>
  client.$executeRawUnsafe(`CREATE INDEX IF NOT EXISTS customer_name_id ON "Customer" (name, id)`);

/** Wall and CPU medians (µs) of each variant, interleaved in a rotating order after warm-up. */
async function timed(variants: (() => PromiseLike<unknown>)[]) {
  const wall = variants.map(() => [] as number[]);
  const cpu = variants.map(() => [] as number[]);
  for (let i = 0; i < WARMUP; i++) for (const v of variants) await v();
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < variants.length; k++) {
      const j = (i + k) % variants.length;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await variants[j]!();
      wall[j]!.push((performance.now() - t0) * 1000);
      const c = process.cpuUsage(c0);
      cpu[j]!.push(c.user + c.system);
    }
  }
  return variants.map((_, j) => ({ wall: median(wall[j]!), cpu: median(cpu[j]!) }));
}

function same(label: string, a: unknown, b: unknown) {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  if (x !== y) throw new Error(`${label}: the scatter's answer differs from one database's\n${x}\n${y}`);
}

// A connection refused by a full server (other benches share it) surfaces on a pool, outside any
// await: drop this run's databases before going down.
process.once("uncaughtException", (error) => {
  console.error(error);
  void (async () => {
    for (const fleet of fleets) await fleet.drop().catch(() => {});
    process.exit(1);
  })();
});

try {
  // The one database holding every row, with all 1024 shards registered on it.
  const base = await makeFleet(1, "scalebase", 1024);
  fleets.push(base);
  const one = open(base.urls[0]!);
  await indexed(one);
  const oneRouted = one.$extends(
    shardRouting({
      registry: createShardRegistry({ shards: base.shards.map((shard) => ({ shard, client: one })) }),
      keyless: "scatter",
    }),
  ) as unknown as Reader;

  const results: {
    size: number;
    op: string;
    base: { wall: number; cpu: number };
    s: { wall: number; cpu: number };
    floor: { wall: number; cpu: number } | undefined;
  }[] = [];
  for (const size of SIZES) {
    const fleet = await makeFleet(size, `scale${size}`);
    fleets.push(fleet);
    const dbs = fleet.urls.map(open);
    await Promise.all(dbs.map(indexed));
    const registry = createShardRegistry({
      shards: fleet.shards.map((shard, i) => ({ shard, client: dbs[fleet.databaseOf[i]!]! })),
    });
    const db = dbs[0]!.$extends(shardRouting({ registry, keyless: "scatter" })) as unknown as Reader;

    // The same rows for every size, on this fleet's shards: names repeat, so the id tiebreaker counts.
    const rows: Customer[] = Array.from({ length: ROWS }, (_, i) => ({
      id: ShardedId.generate("Customer", fleet.shards[i % fleet.shards.length]!) as string,
      name: `n${String((i * 7919) % (ROWS >> 1)).padStart(6, "0")}`,
      region: ["eu", "mx", "us"][i % 3]!,
    }));
    const perDb = dbs.map(() => [] as Customer[]);
    for (const [i, r] of rows.entries()) perDb[fleet.databaseOf[i % fleet.shards.length]!]!.push(r);
    await Promise.all(dbs.map((c, d) => c.customer.createMany({ data: perDb[d]! })));
    await one.customer.deleteMany();
    await one.customer.createMany({ data: rows });
    await Promise.all([one, ...dbs].map((c) => c.$executeRawUnsafe(`ANALYZE "Customer"`)));

    const top = { orderBy: { name: "asc" }, take: PAGE };
    const page = { orderBy: { name: "asc" }, limit: PAGE };
    const first = await oneRouted.$scatterPage("customer", page);
    const next = { ...page, cursor: first.nextCursor };
    same("findMany", await db.customer.findMany(top), await one.customer.findMany(top as never));
    same("$scatterPage", await db.$scatterPage("customer", page), first);
    same(
      "$scatterPage cursor",
      await db.$scatterPage("customer", next),
      await oneRouted.$scatterPage("customer", next),
    );
    same("count", await db.customer.count(), await one.customer.count());

    // By hand: what each leg asks (the order with its id tiebreaker, the page's extra row), sent
    // to every database at once through its own PrismaClient, without shardkit: the floor.
    const legs = { orderBy: [{ name: "asc" }, { id: "asc" }], take: PAGE };
    const pageLegs = { ...legs, take: PAGE + 1 };
    const byHand = (run: (c: PrismaClient) => PromiseLike<unknown>) => () => Promise.all(dbs.map(run));
    type Op = [string, () => PromiseLike<unknown>, () => PromiseLike<unknown>, (() => PromiseLike<unknown>)?];
    const ops: Op[] = [
      [
        "findMany orderBy name, take 20",
        () => one.customer.findMany(top as never),
        () => db.customer.findMany(top),
        byHand((c) => c.customer.findMany(legs as never)),
      ],
      [
        "$scatterPage limit 20",
        () => oneRouted.$scatterPage("customer", page),
        () => db.$scatterPage("customer", page),
        byHand((c) => c.customer.findMany(pageLegs as never)),
      ],
      [
        "$scatterPage limit 20, cursor",
        () => oneRouted.$scatterPage("customer", next),
        () => db.$scatterPage("customer", next),
      ],
      ["count", () => one.customer.count(), () => db.customer.count(), byHand((c) => c.customer.count())],
    ];
    for (const [op, b, s, floor] of ops) {
      const [tb, ts, tf] = await timed(floor ? [b, s, floor] : [b, s]);
      results.push({ size, op, base: tb!, s: ts!, floor: tf });
      console.error(`${size} databases: ${op} done`);
    }
    await registry.disconnect();
    await fleet.drop();
    fleets.splice(fleets.indexOf(fleet), 1);
  }

  const us = (x: number) => `${Math.round(x)} µs`;
  console.log(
    `${ROWS} rows; medians of ${ROUNDS} interleaved calls; ratio = scatter / one database holding every row`,
  );
  console.log(
    "| operation | databases | one database: wall, CPU | scatter: wall (ratio) | scatter: CPU (ratio) | CPU per leg | by hand: CPU (ratio) |",
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const r of results) {
    const floor = r.floor ? `${us(r.floor.cpu)} (${(r.floor.cpu / r.base.cpu).toFixed(2)})` : "–";
    console.log(
      `| ${r.op} | ${r.size} | ${us(r.base.wall)}, ${us(r.base.cpu)} | ${us(r.s.wall)} (${(r.s.wall / r.base.wall).toFixed(2)}) | ${us(r.s.cpu)} (${(r.s.cpu / r.base.cpu).toFixed(2)}) | ${us(r.s.cpu / r.size)} | ${floor} |`,
    );
  }
} finally {
  await Promise.allSettled(clients.map((c) => c.$disconnect()));
  for (const fleet of fleets) await fleet.drop().catch(() => {});
}
