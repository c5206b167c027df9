// Databases for the atomic-action tests: a server of their own with max_prepared_transactions > 0
// (the machine's main server has it at 0, PostgreSQL's default), three shard databases on it, and
// wallets on each shard. Made in the test file's beforeAll (shared by test runs that overlap), the
// server dropped by the last run to end.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, type ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, patient, shareCluster } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { shardRouting } from "../src/extension.js";
import { createShardRegistry } from "../src/registry.js";
import { rolloutSchema } from "../src/rollout.js";
import { PrismaClient } from "./generated/prisma/client.js";
import { models, S } from "./layout.js";

export const ATOMIC_SERVER = { cluster: "skatomic", port: 5461 };

/** Which shards each database holds: x 0/0 0/1, y 0/2 1/0, z 1/1 1/2 (as test/world.ts). */
export const LAYOUT: string[][] = [
  [S.g0m0.key, S.g0m1.key],
  [S.g0m2.key, S.g1m0.key],
  [S.g1m1.key, S.g1m2.key],
];

/** Makes the server (when no overlapping run did) and three databases with the test schema; returns their URLs and the release. */
export async function atomicDatabases(tag: string): Promise<{ urls: string[]; release(): Promise<void> }> {
  const { cluster, port } = ATOMIC_SERVER;
  const release = await shareCluster(cluster, port, { settings: { max_prepared_transactions: 50 } });
  const names = ["x", "y", "z"].map((d) => `sk_atomic_${tag}_${d}_${process.pid}`);
  const urls: string[] = [];
  for (const name of names) urls.push(await createDatabase(port, name));
  await rolloutSchema({
    schema: new URL("./schema.prisma", import.meta.url).pathname,
    targets: names.map((name, i) => ({ name, adapter: new PrismaPg({ connectionString: urls[i]! }) })),
    onProgress: () => {},
  });
  return {
    urls,
    release: async () => {
      for (const name of names) await dropDatabase(port, name).catch(() => {});
      await release();
    },
  };
}

/** A router over the databases at `urls` (shards as `LAYOUT`): its clients, registry and routed client. */
export function atomicRouter(
  urls: readonly string[],
  layout: string[][] = LAYOUT,
  options: { timeoutMs?: number; atomicRecovery?: false } = {},
) {
  const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
  const registry = createShardRegistry({
    shards: layout.flatMap((keys, i) => keys.map((key) => ({ shard: key, client: clients[i]! }))),
    databases: clients.map((client, i) => ({ client, name: `db${i}` })),
  });
  const db = clients[0]!.$extends(shardRouting({ registry, models, ...options }));
  return { clients, registry, db, close: () => registry.disconnect() };
}

export type AtomicRouter = ReturnType<typeof atomicRouter>;

/** A customer and its wallet on `shard` with `balance`; the wallet's id. */
export async function walletOn(
  router: AtomicRouter,
  shard: ShardIdentifier,
  balance: bigint,
): Promise<string> {
  const customerId = ShardedId.generate("Customer", shard);
  const id = ShardedId.colocatedWith("Wallet", customerId);
  await router.db.customer.create({
    data: { id: customerId, name: "w", region: shard.group === 0 ? "eu" : "mx" },
  });
  await router.db.wallet.create({ data: { id, customerId, balance } });
  return id;
}

/**
 * Stages a transfer of `amount` from wallet `from` to wallet `to`, with an outbox event on each
 * side naming the transfer (`aggregateId`), so that each side of each transfer can be counted.
 */
export function stageTransfer(
  unit: { update: (...a: never[]) => unknown; emit: (...a: never[]) => unknown },
  t: { id: string; from: string; to: string; amount: bigint },
): void {
  const u = unit as unknown as {
    update(model: "wallet", args: object): unknown;
    emit(shard: string, event: object): unknown;
  };
  u.update("wallet", { where: { id: t.from }, data: { balance: { decrement: t.amount } } });
  u.update("wallet", { where: { id: t.to }, data: { balance: { increment: t.amount } } });
  u.emit(t.from, { topic: "debit", aggregateId: t.id, payload: { amount: String(t.amount) } });
  u.emit(t.to, { topic: "credit", aggregateId: t.id, payload: { amount: String(t.amount) } });
}

/** A transfer of `amount` from wallet `from` to wallet `to`, named by an id of its own (on 0/0). */
export const transfer = (from: string, to: string, amount: bigint) => ({
  id: ShardedId.generate("Customer", S.g0m0),
  from,
  to,
  amount,
});

/**
 * A coordinator that stops for good the `after`th time it reaches `point` (its promise never
 * settles), as a crashed one would.
 */
export const stopAt = (point: string, after = 1) => {
  let seen = 0;
  return (at: string) => (at === point && ++seen === after ? new Promise<void>(() => {}) : undefined);
};

/**
 * A transfer of 30 from a new wallet on 0/0 (the decider, balance 100) to a new one on `to`, by
 * `world.router`, whose coordinator stops for good right after the decision: returned once the debit
 * is committed, the credit left prepared.
 */
export async function orphanAfterDecision(
  world: { router: AtomicRouter; urls: readonly string[] },
  to: ShardIdentifier,
) {
  const a = await walletOn(world.router, S.g0m0, 100n);
  const b = await walletOn(world.router, to, 0n);
  const t = transfer(a, b, 30n);
  void world.router.db.$action((unit) => stageTransfer(unit, t), {
    atomic: true,
    atomicProbe: stopAt("decided"),
  });
  await eventually(
    "the decision to commit",
    async () => (await ledger(world.urls)).sides.get(t.id)?.join() === "debit",
  );
  return { a, b, t };
}

/** Runs `sql` on each database by a plain connection; the rows of each. */
export async function eachDatabase<T>(urls: readonly string[], sql: string): Promise<T[][]> {
  return Promise.all(
    urls.map(async (url) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(sql)).rows as T[];
      } finally {
        await client.end();
      }
    }),
  );
}

/** Every database's prepared transactions (global ids). */
export async function preparedGids(urls: readonly string[]): Promise<string[]> {
  return (
    await eachDatabase<{ gid: string }>(
      urls,
      "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
    )
  )
    .flat()
    .map((r) => r.gid);
}

/**
 * What each transfer left, counted row by row: the sides of it that committed (its debit and credit
 * events), and the total of every wallet's balance.
 */
export async function ledger(urls: readonly string[]) {
  const events = (
    await eachDatabase<{ topic: string; aggregateId: string }>(
      urls,
      `SELECT topic, "aggregateId"::text AS "aggregateId" FROM "OutboxEvent"`,
    )
  ).flat();
  const sides = new Map<string, string[]>();
  for (const e of events) sides.set(e.aggregateId, [...(sides.get(e.aggregateId) ?? []), e.topic].sort());
  const balances = (
    await eachDatabase<{ total: string | null }>(urls, `SELECT sum(balance)::text AS total FROM "Wallet"`)
  )
    .flat()
    .reduce((sum, r) => sum + BigInt(r.total ?? "0"), 0n);
  return { sides, total: balances };
}

export { models, S };

/**
 * A test file's databases and router: made before its tests, dropped after them, and before each
 * test every prepared transaction concluded (by recovery) and every table emptied. `databases`
 * makes them (default: on the atomic tests' server), `router` gives the router's options (asked for when it is made), and
 * `resetMs` bounds the reset before each test.
 */
export function useAtomicWorld(
  tag: string,
  options: {
    databases?: (tag: string) => Promise<{ urls: string[]; release(): Promise<void> }>;
    router?: () => Parameters<typeof atomicRouter>[2];
    resetMs?: number;
  } = {},
) {
  const world = { urls: [] as string[], router: undefined as unknown as AtomicRouter };
  let release: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const made = await (options.databases ?? atomicDatabases)(tag);
    release = made.release;
    world.urls = made.urls;
    world.router = atomicRouter(made.urls, undefined, options.router?.());
  }, patient(180_000));
  afterAll(async () => {
    await world.router?.close();
    await release?.();
  }, patient(120_000));
  beforeEach(async () => {
    await recoverAll(world.router, world.urls);
    await eachDatabase(
      world.urls,
      `TRUNCATE "OrderItem", "Order", "OutboxEvent", "Wallet", "Customer", "AtomicDecision"`,
    );
  }, options.resetMs);
  return world;
}

/** Recovery by `router` until nothing is prepared (a lock a dead coordinator held may need a moment to go). */
export async function recoverAll(router: AtomicRouter, urls: readonly string[]): Promise<void> {
  await eventually("recovery to conclude every prepared transaction", async () => {
    await router.db.$recoverAtomic({ leaseMs: 0 });
    return (await preparedGids(urls)).length === 0;
  });
}
