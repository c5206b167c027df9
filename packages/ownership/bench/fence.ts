// pnpm bench (in packages/ownership): what ownership costs a steady-state write, each figure a
// ratio against a baseline measured in the same run. Calls alternate between the variants (AB,
// BA, ...) so noise hits both alike; medians of per-call latency are reported.
//
//   1. a routed write (update by id) with a partition map attached vs the same routed write
//      without one: databases with no fenced shard carry no check at all
//   2. a shard transaction (read, then conditional write) with the map attached vs without: with
//      it, the transaction first asserts the shard's epoch (one more statement)
//   3. the same write to a shard that is not moving, on a database where another shard is fenced
//      (its tables carry the fence trigger; the write pays the trigger's WHEN expression) vs
//      before that shard was fenced
//   4. a write to a shard armed for a move (its record check, and its key noted) vs not armed
//   5. a read by id that finds a row, and one that finds nothing, with the map attached vs none:
//      an answer that found nothing is confirmed with the database (one more statement)
//
// BENCH_ROUNDS (default 2000): calls per variant. Prisma's production error format ("minimal").
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { ensureCluster, MAIN_PORT, testDatabases, withClient } from "@shardkit/test-db";
import { PartitionMap, ShardLease } from "../src/index.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { models, TABLES } from "../test/layout.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2000);
const WARMUP = 500;
const s00 = ShardIdentifier.of(0, 0);
const s01 = ShardIdentifier.of(0, 1);

await ensureCluster("main", MAIN_PORT);
const names = [`sk_bench_own_a_${process.pid}`, `sk_bench_own_b_${process.pid}`];
const databases = await testDatabases({ names });
const { urls } = databases;
const clients: PrismaClient[] = [];
try {
  await bench();
} finally {
  await Promise.all(clients.map((c) => c.$disconnect()));
  await databases.drop();
}

async function bench() {
  for (const [i, url] of urls.entries())
    await withClient(url, (admin) =>
      admin.query(`ALTER DATABASE "${names[i]}" SET synchronous_commit = off`),
    );
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: urls.map((url, i) => ({ name: names[i]!, adapter: new PrismaPg({ connectionString: url }) })),
    onProgress: () => {},
  });
  const router = () => {
    const [a, b] = urls.map((url) => {
      const client = new PrismaClient({
        adapter: new PrismaPg({ connectionString: url }),
        errorFormat: "minimal",
      });
      clients.push(client);
      return client;
    }) as [PrismaClient, PrismaClient];
    const registry = createShardRegistry({
      shards: [
        { shard: s00, client: a },
        { shard: s01, client: a },
      ],
      databases: [{ client: b, name: "b" }],
    });
    return { registry, db: a.$extends(shardRouting({ registry, models })) };
  };
  const plain = router();
  const mapped = router();
  const map = await PartitionMap.open({ registry: mapped.registry, tables: TABLES });
  const ids = Array.from({ length: 100 }, () => ShardedId.generate("Bucket", s00) as string);
  await plain.db.bucket.createMany({ data: ids.map((id) => ({ id, name: "b", remaining: 1_000_000 })) });
  const write = (db: typeof plain.db, i: number) =>
    db.bucket.update({ where: { id: ids[i % ids.length]! }, data: { remaining: { decrement: 1 } } });

  async function compare(label: string, base: () => Promise<unknown>, other: () => Promise<unknown>) {
    const times: [number[], number[]] = [[], []];
    const variants = [base, other];
    for (let i = 0; i < WARMUP; i++) await variants[i % 2]!();
    for (let i = 0; i < ROUNDS * 2; i++) {
      const which = (i + Math.floor(i / 2)) % 2; // AB BA AB ...
      const started = performance.now();
      await variants[which]!();
      times[which]!.push(performance.now() - started);
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    const [b, o] = [median(times[0]), median(times[1])];
    console.log(
      `${label}: ${(o / b).toFixed(3)}x (${(o * 1000).toFixed(0)} us vs ${(b * 1000).toFixed(0)} us)`,
    );
  }

  let n = 0;
  await compare(
    "1. routed write, partition map attached vs none",
    () => write(plain.db, n++),
    () => write(mapped.db, n++),
  );
  const decide = (db: typeof plain.db, i: number) => {
    const id = ids[i % ids.length]!;
    return db.$transactionOn(id, async (tx) => {
      const bucket = await tx.bucket.findUnique({ where: { id } });
      return tx.bucket.update({ where: { id }, data: { remaining: bucket!.remaining - 1 } });
    });
  };
  await compare(
    "2. shard transaction (read, write), partition map attached vs none",
    () => decide(plain.db, n++),
    () => decide(mapped.db, n++),
  );
  const absent = ShardedId.generate("Bucket", s00) as string;
  await compare(
    "5a. read by id that finds its row, partition map attached vs none",
    () => plain.db.bucket.findUnique({ where: { id: ids[n++ % ids.length]! } }),
    () => mapped.db.bucket.findUnique({ where: { id: ids[n++ % ids.length]! } }),
  );
  await compare(
    "5b. read by id that finds nothing, partition map attached (confirmed) vs none",
    () => plain.db.bucket.findUnique({ where: { id: absent } }),
    () => mapped.db.bucket.findUnique({ where: { id: absent } }),
  );
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const spare = mapped.registry.databases.find((p) => p.name === "b")!;
  /**
   * The same write with and without a state of the map that cannot be interleaved call by call:
   * shard 0/1 held by a lease for a move to b (`hold`: fence it, or arm it), given back after; the
   * two phases alternate in blocks of 200 calls.
   */
  async function phases(
    label: string,
    call: () => Promise<unknown>,
    hold: (lease: ShardLease<PrismaClient>) => Promise<unknown>,
  ) {
    const before: number[] = [];
    const after: number[] = [];
    for (let block = 0; block < ROUNDS / 200; block++) {
      for (const phase of block % 2 === 0 ? ["before", "after"] : ["after", "before"]) {
        const lease = phase === "after" ? await ShardLease.take(map, s01, spare) : undefined;
        if (lease) await hold(lease);
        for (let i = 0; i < 200; i++) {
          const started = performance.now();
          await call();
          (phase === "after" ? after : before).push(performance.now() - started);
        }
        if (lease) {
          await lease.unfence();
          await lease.release();
        }
      }
    }
    const [b, a] = [median(before), median(after)];
    console.log(
      `${label}: ${(a / b).toFixed(3)}x (${(a * 1000).toFixed(0)} us vs ${(b * 1000).toFixed(0)} us)`,
    );
  }
  // 3: the same write before and after another shard of its database is fenced.
  await phases(
    "3. write to a shard not moving, another shard of its database fenced vs not",
    () => write(mapped.db, n++),
    (lease) => lease.fence(),
  );
  // 4: a write to a shard armed for a move (while its rows are copied) vs not armed.
  const moving = Array.from({ length: 100 }, () => ShardedId.generate("Bucket", s01) as string);
  await plain.db.bucket.createMany({ data: moving.map((id) => ({ id, name: "b", remaining: 1_000_000 })) });
  await phases(
    "4. write to a shard armed for a move vs not armed",
    () =>
      mapped.db.bucket.update({
        where: { id: moving[n++ % moving.length]! },
        data: { remaining: { decrement: 1 } },
      }),
    (lease) => lease.arm(),
  );
  map.close();
}
