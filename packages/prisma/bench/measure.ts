// How the benches time calls: every variant's call, interleaved in a rotating order (ABC, BCA, CAB,
// ...) so a noisy disk or CPU hits every variant alike, after warm-up calls; medians. And the
// database a bench runs on.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, type ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { rolloutSchema } from "../src/rollout.js";

export type Variant = { name: string; run: (i: number) => PromiseLike<unknown> };

export const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

/** Median latency (ms) of each variant over `rounds` calls, after `warmup` calls each. */
export async function measure(variants: Variant[], warmup: number, rounds: number): Promise<number[]> {
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < warmup; i++) for (const v of variants) await v.run(i);
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < variants.length; k++) {
      const j = (i + k) % variants.length;
      const start = performance.now();
      await variants[j]!.run(warmup + i);
      samples[j]!.push(performance.now() - start);
    }
  }
  return samples.map(median);
}

/**
 * Median latency (ms) of each variant over `rounds` calls after `warmup` calls each, every round
 * running the variants in a shuffled order (seeded, so runs compare): a fixed rotation would always
 * put the same variant after another and charge it for that one's leftover work. `beforeRound(i)`
 * runs, untimed, before round i.
 */
export async function measureShuffled(
  variants: Variant[],
  warmup: number,
  rounds: number,
  beforeRound: (i: number) => void = () => {},
): Promise<number[]> {
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < warmup; i++) for (const v of variants) await v.run(i);
  let seed = 42;
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const order = variants.map((_, j) => j);
  for (let i = 0; i < rounds; i++) {
    beforeRound(i);
    for (let k = order.length - 1; k > 0; k--) {
      const r = Math.floor(random() * (k + 1));
      [order[k], order[r]] = [order[r]!, order[k]!];
    }
    for (const j of order) {
      const start = performance.now();
      await variants[j]!.run(i);
      samples[j]!.push(performance.now() - start);
    }
  }
  return samples.map(median);
}

/** A client of the bench's database: the customers it reads. */
type Customers = {
  customer: {
    createMany(args: { data: { id: string; name: string; region: string }[] }): PromiseLike<unknown>;
  };
};

/** 500 customers on `shardOf(i)` written through `own`, the table analyzed: their IDs. */
export async function seedCustomers(own: Customers, url: string, shardOf: (i: number) => ShardIdentifier) {
  const ids = Array.from({ length: 500 }, (_, i) => ShardedId.generate("Customer", shardOf(i)) as string);
  await own.customer.createMany({ data: ids.map((id, i) => ({ id, name: `c${i}`, region: "eu" })) });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query("ANALYZE");
  await admin.end();
  return ids;
}

/** A routed client (or the database's own) as the variant `name`: findUnique by one of `ids`, in turn. */
type Finder = { customer: { findUnique(args: { where: { id: string } }): PromiseLike<unknown> } };
export const findUniqueBy = (ids: readonly string[], name: string, db: Finder): Variant => ({
  name,
  run: (i) => db.customer.findUnique({ where: { id: ids[i % ids.length]! } }),
});

/**
 * Prints the medians as a Markdown table under `title`: each variant's median and its ratio to the
 * medians of the variants at `baselines` (their indexes), each column headed by that variant's `vs`.
 */
export function printMedians(
  title: string,
  variants: readonly Variant[],
  medians: readonly number[],
  baselines: readonly { index: number; vs: string }[],
): void {
  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  console.log(`\n${title}\n`);
  console.log(`| variant | median | ${baselines.map((b) => `vs ${b.vs}`).join(" | ")} |`);
  console.log(`|---|---|${baselines.map(() => "---|").join("")}`);
  for (const [j, variant] of variants.entries()) {
    const ratios = baselines.map((b) => (medians[j]! / medians[b.index]!).toFixed(3));
    console.log(`| ${variant.name} | ${us(medians[j]!)} | ${ratios.join(" | ")} |`);
  }
}

/**
 * Readies bench databases: the test schema rolled out to each; with `asyncCommit`, first their
 * commits set not to wait for fsync (`synchronous_commit = off`: routing is measured, not the disk).
 */
async function readyBenchDatabases(
  databases: readonly { name: string; url: string }[],
  { asyncCommit = false } = {},
): Promise<void> {
  if (asyncCommit) {
    for (const { name, url } of databases) {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
      await admin.end();
    }
  }
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: databases.map(({ name, url }) => ({ name, adapter: new PrismaPg({ connectionString: url }) })),
    onProgress: () => {},
  });
}

/**
 * A bench's database: its name and URL, and the clients to disconnect before it is dropped (one
 * list for all the databases of a bench).
 */
export interface BenchDatabase {
  name: string;
  url: string;
  clients: { $disconnect(): Promise<void> }[];
}

/**
 * Runs `bench` on databases of its own (`sk_bench_<tag>_<pid>` on the main server, one per tag)
 * readied by `readyBenchDatabases` with `options`; afterwards, whatever happened, disconnects the
 * clients it listed and drops them.
 */
export async function onBenchDatabases(
  tags: readonly string[],
  bench: (databases: BenchDatabase[]) => Promise<void>,
  options: { asyncCommit?: boolean } = {},
): Promise<void> {
  await ensureCluster("main", MAIN_PORT);
  const names = tags.map((tag) => `sk_bench_${tag}_${process.pid}`);
  const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
  const clients: BenchDatabase["clients"] = [];
  const databases = names.map((name, i) => ({ name, url: urls[i]!, clients }));
  try {
    await readyBenchDatabases(databases, options);
    await bench(databases);
  } finally {
    await Promise.all(clients.map((client) => client.$disconnect()));
    for (const name of names) await dropDatabase(MAIN_PORT, name);
  }
}

/** `onBenchDatabases` with one database. */
export const onBenchDatabase = (
  tag: string,
  bench: (db: BenchDatabase) => Promise<void>,
  options: { asyncCommit?: boolean } = {},
) => onBenchDatabases([tag], ([db]) => bench(db!), options);
