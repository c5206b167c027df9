// Connections a router holds: pools warmed at open (each database's first call reuses the
// connection the open left), opened on first use and closed when idle (the serverless setting: no
// warming, a pool of 1 that closes at once), and routed traffic behind PgBouncer in transaction
// mode, where many routers share a few server connections per database.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import {
  createDatabase,
  dropDatabase,
  MAIN_PORT,
  patient,
  pgBouncerPath,
  pgUrl,
  startPgBouncer,
  withClient,
} from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { ConnectionBudgetError } from "./errors.js";
import { shardRouting } from "./extension.js";
import { openShards } from "./open/open.js";
import { createShardRegistry } from "./registry.js";
import { rolloutSchema } from "./rollout.js";

const schema = new URL("../test/schema.prisma", import.meta.url).pathname;
const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(1, 0)];
const names = ["a", "b"].map((k) => `sk_prisma_conn_${k}_${process.pid}`);
let urls: string[] = [];

/** Server connections (backends) open on each of `names`, read from the server itself. */
async function backends(): Promise<number[]> {
  return (await backendPids()).map((pids) => pids.length);
}

/** The rows `sql` (its one parameter: `names`) reads on the server, from its `postgres` database. */
async function serverRows<Row>(sql: string): Promise<Row[]> {
  return withClient(pgUrl(MAIN_PORT, "postgres"), async (admin) => (await admin.query(sql, [names])).rows);
}

/** The process ids of the server connections open on each of `names`. */
async function backendPids(): Promise<number[][]> {
  const rows = await serverRows<{ datname: string; pid: number }>(
    "SELECT datname, pid FROM pg_stat_activity WHERE datname = ANY($1) ORDER BY pid",
  );
  return names.map((name) => rows.filter((r) => r.datname === name).map((r) => r.pid));
}

/**
 * Sessions each of `names` has had since the server started (`pg_stat_database.sessions`). A
 * backend writes its count before it leaves `pg_stat_activity`, so once `backends()` reads 0 the
 * count includes every connection that has ended.
 */
async function sessions(): Promise<number[]> {
  const rows = await serverRows<{ datname: string; sessions: string }>(
    "SELECT datname, sessions FROM pg_stat_database WHERE datname = ANY($1)",
  );
  return names.map((name) => Number(rows.find((r) => r.datname === name)?.sessions ?? 0));
}

/**
 * The two shards' configuration, each on its database (at `url(i)`: the database itself unless
 * given) with a pool of `pool`, marked `pooler` where given.
 */
const configOf = (pool: number, url = (i: number) => urls[i]!, pooler?: boolean) =>
  JSON.stringify(
    shards.map((s, i) => ({
      group: s.group,
      member: s.member,
      url: url(i),
      pool,
      ...(pooler === undefined ? {} : { pooler }),
    })),
  );

/** `openShards` on `shardsJson` with the test schema, its log silenced, `options` beside. */
const openWith = (shardsJson: string, options: { idleTimeoutMs?: number; warm?: boolean } = {}) =>
  openShards({
    schema,
    shardsJson,
    createClient: (adapter) => new PrismaClient({ adapter }),
    log: () => {},
    ...options,
  });

beforeAll(async () => {
  urls = [];
  for (const name of names) urls.push(await createDatabase(MAIN_PORT, name));
  await rolloutSchema({
    schema,
    targets: names.map((name, i) => ({
      name,
      adapter: new PrismaPg({ connectionString: urls[i]!, max: 1 }),
    })),
    onProgress: () => {},
  });
}, patient(60_000));

afterAll(async () => {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
});

describe("connections", () => {
  it(
    "an open warms every database's client: the first routed calls run on the connections it left open, none opened after",
    async () => {
      const open = await openWith(configOf(2), { idleTimeoutMs: 60_000 });
      try {
        // The open's own checks ran through each database's pool, and its warm-up took the same
        // connection: one per database.
        await eventually("only the warmed pools' connections are open", async () =>
          (await backends()).every((n) => n === 1),
        );
        const warmed = await backendPids();
        const db = open.registry.databases[0]!.client.$extends(shardRouting({ registry: open.registry }));
        for (const shard of shards) {
          const id = ShardedId.generate("Customer", shard);
          await db.customer.create({ data: { id, name: "first", region: "eu" } });
          expect((await db.customer.findUnique({ where: { id } }))?.name).toBe("first");
        }
        // One call at a time on each database: its pool's warm connection answered them all.
        expect(await backendPids()).toEqual(warmed);
      } finally {
        await open.close();
      }
    },
    patient(60_000),
  );

  it(
    "serverless: without warming, a database's pool opens on its first call and closes when idle; a pool of 1 never holds more",
    async () => {
      const open = await openWith(configOf(1), { idleTimeoutMs: 100, warm: false });
      try {
        // The open's own checks ran through each database's pool, whose connection idled out since.
        await eventually("the open's connections are closed", async () =>
          (await backends()).every((n) => n === 0),
        );
        const before = await sessions();
        const id = ShardedId.generate("Customer", shards[0]!);
        const db = open.registry.clientFor(id);
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            i === 0
              ? db.customer.create({ data: { id, name: "first", region: "eu" } })
              : db.customer.findMany({ where: { region: "eu" } }),
          ),
        );
        await eventually("a's idle connection is closed", async () => (await backends())[0] === 0);
        // Ten calls on a's pool of 1 were served by one connection, opened for them and closed
        // since; b was never called. Counted by the server once each connection has ended, so
        // however slow the host, no connection can come or go unseen between calls and count.
        const afterCalls = await sessions();
        expect(afterCalls.map((n, i) => n - before[i]!)).toEqual([1, 0]);
        // The next call opens it again: one more session, closed again when idle.
        expect((await db.customer.findUnique({ where: { id } }))?.name).toBe("first");
        await eventually("a's idle connection is closed", async () => (await backends())[0] === 0);
        expect((await sessions()).map((n, i) => n - afterCalls[i]!)).toEqual([1, 0]);
      } finally {
        await open.close();
      }
    },
    patient(60_000),
  );

  describe.skipIf(!pgBouncerPath())("behind PgBouncer in transaction mode", () => {
    let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
    beforeAll(async () => {
      bouncer = await startPgBouncer({ poolSize: 2, mode: "transaction" });
    }, patient(60_000));
    afterAll(() => bouncer?.stop());

    it(
      "routed calls, in lists, scatters and shard transactions from three routers share two server connections per database; every acknowledged write is there",
      async () => {
        const routers = [0, 1, 2].map(() => {
          const clients = names.map(
            (name) =>
              new PrismaClient({ adapter: new PrismaPg({ connectionString: bouncer.url(name), max: 10 }) }),
          );
          const registry = createShardRegistry({
            shards: shards.map((shard, i) => ({ shard, client: clients[i]! })),
          });
          return { registry, db: clients[0]!.$extends(shardRouting({ registry, keyless: "scatter" })) };
        });
        const written: string[] = [];
        await Promise.all(
          Array.from({ length: 60 }, async (_, i) => {
            const { db } = routers[i % 3]!;
            const id = ShardedId.generate("Customer", shards[i % 2]!);
            if (i % 3 === 0) {
              // Twenty transactions queue for two server connections: each may wait for a
              // connection longer than Prisma's 2 s default on a busy host.
              const waits = { maxWait: patient(20_000), timeout: patient(20_000) };
              await db.$transactionOn(
                id,
                async (tx) => {
                  await tx.customer.create({ data: { id, name: `t${i}`, region: "mx" } });
                  await tx.wallet.create({
                    data: { id: ShardedId.colocatedWith("Wallet", id), customerId: id, balance: 10n },
                  });
                },
                waits,
              );
            } else {
              await db.customer.create({ data: { id, name: `c${i}`, region: "mx" } });
              await db.customer.update({ where: { id }, data: { name: `u${i}` } });
            }
            written.push(id);
            expect(await db.customer.findUnique({ where: { id } })).not.toBeNull();
          }),
        );
        // Thirty connections asked for per database, two given by PgBouncer.
        const open = await backends();
        expect(open.every((n) => n >= 1 && n <= 2)).toBe(true);
        const { db } = routers[0]!;
        expect(await db.customer.count({ where: { region: "mx" } })).toBe(60);
        expect((await db.customer.findMany({ where: { id: { in: written } } })).length).toBe(60);
        expect(await db.wallet.count()).toBe(20);
        const top = await db.customer.findMany({ where: { region: "mx" }, orderBy: { id: "asc" }, take: 5 });
        expect(top.map((c) => c.id)).toEqual([...written].sort().slice(0, 5));
        for (const r of routers) await r.registry.disconnect();
      },
      patient(60_000),
    );

    it(
      "openShards through the pooler: pools the server alone could not hold open once marked `pooler: true`; the same pools direct are refused",
      async () => {
        // 2 x 60 connections on one server of max_connections 100: refused before anything is changed.
        await expect(openWith(configOf(60))).rejects.toBeInstanceOf(ConnectionBudgetError);
        const pooled = await openWith(configOf(60, (i) => bouncer.url(names[i]!), true));
        try {
          const id = ShardedId.generate("Customer", shards[1]!);
          await pooled.registry.clientFor(id).customer.create({ data: { id, name: "pooled", region: "eu" } });
          expect((await pooled.registry.clientFor(id).customer.findUnique({ where: { id } }))?.name).toBe(
            "pooled",
          );
        } finally {
          await pooled.close();
        }
      },
      patient(60_000),
    );
  });
});
