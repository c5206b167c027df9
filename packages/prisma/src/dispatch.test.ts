import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { newCustomer } from "../test/layout.js";
import { loggedClient, makeWorld, S } from "../test/world.js";
import { checkConnectionBudget } from "./budget.js";
import { shardRegistryFromConfig } from "./config.js";
import { ConnectionBudgetError, CrossShardError, RoutingOptionsError } from "./errors.js";
import { shardRouting } from "./extension.js";
import { createShardRegistry } from "./registry.js";

// How a routed call reaches a database: once, through that database's fully configured client,
// in the scope of its own routed client. Real PostgreSQL: databases a and b on one server, c on another.
const world = makeWorld();
const { db, clients } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

describe("each routed client owns its scope", () => {
  // A second routed client, another registry: its shard 0/0 lives on database b (world's 0/0 is on a).
  const urls = inject("shardUrls");
  const log: { db: "a" | "b" | "c"; sql: string }[] = [];
  const otherClient = loggedClient("b", urls.b, log);
  const other = otherClient.$extends(
    shardRouting({ registry: createShardRegistry({ shards: [{ shard: S.g0m0, client: otherClient }] }) }),
  );
  afterAll(() => otherClient.$disconnect());

  it("inside client 1's shard transaction, client 2 reads and writes its own database", async () => {
    const mine = newCustomer(S.g0m0, "client 2's row");
    await other.customer.create({ data: mine });
    const seen = await db.$transactionOn(S.g0m0, async (tx) => {
      await tx.customer.create({ data: newCustomer(S.g0m0, "client 1's row") });
      // Same shard key, another routed client: runs on its own database, outside client 1's transaction.
      const found = await other.customer.findUnique({ where: { id: mine.id } });
      await other.customer.update({ where: { id: mine.id }, data: { name: "updated by client 2" } });
      return found?.name;
    });
    expect(seen).toBe("client 2's row");
    expect((await clients.b.customer.findUnique({ where: { id: mine.id } }))?.name).toBe(
      "updated by client 2",
    );
    expect(await clients.a.customer.count()).toBe(1);
  });

  it("client 2's writes are not refused during client 1's action, and land outside it", async () => {
    const mine = newCustomer(S.g0m0, "written during the action");
    await db.$action(async (unit) => {
      unit.create("customer", { data: newCustomer(S.g0m1) });
      await other.customer.create({ data: mine }); // client 1 refuses direct writes; client 2 is not in an action
    });
    expect(await clients.b.customer.findUnique({ where: { id: mine.id } })).not.toBeNull();
    expect(await clients.a.customer.count()).toBe(1);
  });

  it("interleaved transactions of both clients commit each on its own database", async () => {
    const rows1 = Array.from({ length: 5 }, () => newCustomer(S.g0m0, "one"));
    const rows2 = Array.from({ length: 5 }, () => newCustomer(S.g0m0, "two"));
    await Promise.all([
      db.$transactionOn(S.g0m0, async (tx) => {
        for (const data of rows1) await tx.customer.create({ data });
      }),
      other.$transactionOn(S.g0m0, async (tx) => {
        for (const data of rows2) {
          await tx.customer.create({ data });
          await other.customer.count(); // a routed call of client 2 joins client 2's transaction
        }
      }),
    ]);
    expect(await clients.a.customer.count({ where: { name: "one" } })).toBe(5);
    expect(await clients.b.customer.count({ where: { name: "two" } })).toBe(5);
    expect(await clients.a.customer.count({ where: { name: "two" } })).toBe(0);
  });
});

describe("extensions added on the routed client apply on every database", () => {
  it("an audit extension records every write, on each database it ran on", async () => {
    const names = new Map<object, string>(Object.entries(clients).map(([name, client]) => [client, name]));
    const audit: string[] = [];
    const audited = db.$extends((client) => {
      const name = names.get(client) ?? "routed";
      return client.$extends({
        query: {
          $allModels: {
            async $allOperations({ model, operation, args, query }) {
              if (/^(create|update|delete|upsert)/.test(operation))
                audit.push(`${name}: ${model}.${operation}`);
              return query(args);
            },
          },
        },
      });
    });
    for (const shard of [S.g0m0, S.g0m2, S.g1m1]) {
      const row = newCustomer(shard);
      await audited.customer.create({ data: row });
      await audited.customer.update({ where: { id: row.id }, data: { name: "audited" } });
    }
    await audited.$transactionOn(S.g1m2, async (tx) => {
      await tx.customer.create({ data: newCustomer(S.g1m2) });
    });
    expect(audit).toEqual([
      "a: Customer.create",
      "a: Customer.update",
      "b: Customer.create",
      "b: Customer.update",
      "c: Customer.create",
      "c: Customer.update",
      "c: Customer.create",
    ]);
    // The plain routed client it was derived from is unchanged.
    await db.customer.create({ data: newCustomer(S.g0m0) });
    expect(audit).toHaveLength(7);
  });

  it("model and client extension methods route the calls they make; $shard returns the extended client", async () => {
    const extended = db.$extends({
      model: {
        customer: {
          async rename(this: unknown, id: string, name: string) {
            const { Prisma } = await import("../test/generated/prisma/client.js");
            const self = Prisma.getExtensionContext(this) as unknown as typeof db.customer;
            return self.update({ where: { id }, data: { name } });
          },
        },
      },
      result: {
        customer: {
          label: { needs: { name: true, region: true }, compute: (c) => `${c.name} (${c.region})` },
        },
      },
    });
    const row = newCustomer(S.g1m1, "before");
    await extended.customer.create({ data: row });
    world.clear();
    const renamed = await extended.customer.rename(row.id, "after");
    expect(renamed.name).toBe("after");
    expect(world.landed("Customer")).toEqual(["c"]);
    expect((await extended.customer.findUnique({ where: { id: row.id } }))?.label).toBe("after (mx)");
    // At run time $shard hands back the database's client with the extensions added after routing;
    // its type is the registry's client type (an extension's type cannot know later extensions).
    const direct = (await extended.$shard(row.id).customer.findUnique({ where: { id: row.id } })) as {
      label?: string;
    } | null;
    expect(direct?.label).toBe("after (mx)");
  });

  it("the fluent API runs on the shard's database and returns the relation", async () => {
    const owner = newCustomer(S.g1m2);
    await db.customer.create({
      data: {
        ...owner,
        wallets: { create: { id: ShardedId.colocatedWith("Wallet", owner.id), balance: 9n } },
      },
    });
    world.clear();
    const wallets = await db.customer.findUnique({ where: { id: owner.id } }).wallets();
    expect(wallets?.map((w) => w.balance)).toEqual([9n]);
    expect(world.landed("Wallet")).toEqual(["c"]);
  });
});

describe("routed calls are lazy, as Prisma's are", () => {
  it("a refused call that is never awaited leaves no unhandled rejection; awaited, a scatter runs", async () => {
    void db.customer.findMany(); // refused (no shard key) and dropped: vitest fails a run on an unhandled rejection
    world.clear();
    expect(await db.$scatter().customer.findMany()).toEqual([]);
    expect(world.landed("Customer")).toEqual(["a", "b", "c"]);
  });
});

describe("one statement per database", () => {
  const statements = (table: string) => {
    const per: Record<string, number> = {};
    for (const entry of world.log) {
      if (entry.sql.includes(`"${table}"`) && !/^(BEGIN|COMMIT)/.test(entry.sql))
        per[entry.db] = (per[entry.db] ?? 0) + 1;
    }
    return per;
  };

  it("an in list over four shards on two databases is two statements, one per database", async () => {
    const rows = [S.g0m0, S.g0m1, S.g0m2, S.g1m0, S.g0m0, S.g1m0].map((s) => newCustomer(s));
    for (const data of rows) await db.customer.create({ data });
    world.clear();
    const found = await db.customer.findMany({
      where: { id: { in: rows.map((r) => r.id) } },
      orderBy: { id: "asc" },
    });
    expect(found.map((r) => r.id)).toEqual(rows.map((r) => r.id).sort());
    expect(statements("Customer")).toEqual({ a: 1, b: 1 });
    world.clear();
    expect(await db.customer.count({ where: { id: { in: rows.map((r) => r.id) } } })).toBe(6);
    expect(statements("Customer")).toEqual({ a: 1, b: 1 });
  });

  it("createMany rows over shards of two databases: one INSERT per database in a cross-shard action, refused outside", async () => {
    const rows = [S.g0m0, S.g0m1, S.g0m0, S.g1m1, S.g1m2].map((s) => newCustomer(s));
    await expect(db.customer.createMany({ data: rows })).rejects.toBeInstanceOf(CrossShardError);
    world.clear();
    const written = await db.$action((unit) => unit.createMany("customer", { data: rows }), {
      allowCrossShard: true,
    });
    expect(written.result).toEqual({ count: 5 });
    expect(written.shards.map((s) => s.key)).toEqual(["0/0", "0/1", "1/1", "1/2"]);
    expect(statements("Customer")).toEqual({ a: 1, c: 1 });
    expect(world.log.filter((l) => l.sql === "COMMIT").map((l) => l.db)).toEqual(["a", "c"]);
    expect(await clients.a.customer.count()).toBe(3);
    expect(await clients.c.customer.count()).toBe(2);
  });
});

describe("installing the extension", () => {
  it("on a client that is not one of the registry's is refused, naming what to do", () => {
    const stranger = new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").a }) });
    expect(() => stranger.$extends(shardRouting({ registry: world.registry }))).toThrow(RoutingOptionsError);
    expect(() => clients.a.$extends(shardRouting({ registry: world.registry })).$extends({})).not.toThrow();
    expect(() => shardRouting({ registry: {} as never })).toThrow(/expected a ShardRegistry/);
  });
});

describe("connection budget", () => {
  const urls = inject("shardUrls");
  const build = (pools: Record<string, number | undefined>, spelling = (u: string) => u) =>
    shardRegistryFromConfig(
      [
        { group: 0, member: 0, url: urls.a, ...(pools.a ? { pool: pools.a } : {}) },
        { group: 0, member: 1, url: spelling(urls.b), ...(pools.b ? { pool: pools.b } : {}) },
        { group: 1, member: 0, url: urls.c, ...(pools.c ? { pool: pools.c } : {}) },
      ],
      {
        createClient: (url, _shards, { pool }) =>
          new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: pool }) }),
      },
    );

  it("pools within max_connections pass, counted per server (a and b share one)", async () => {
    const registry = build({});
    try {
      const report = await checkConnectionBudget(registry);
      expect(report.ok).toBe(true);
      expect(report.servers.map((s) => s.pools).sort()).toEqual([10, 20]); // default pool 10 each
      expect(registry.databases.map((p) => p.pool)).toEqual([10, 10, 10]);
    } finally {
      await registry.disconnect();
    }
  });

  it("pools over a server's max_connections throw ConnectionBudgetError naming the server and every pool", async () => {
    // The same server under another URL spelling (postgres:// and 127.0.0.1 vs localhost) still counts once.
    const registry = build({ a: 60, b: 60 }, (u) =>
      u.replace("postgresql://", "postgres://").replace("127.0.0.1", "localhost"),
    );
    try {
      const error = await checkConnectionBudget(registry).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectionBudgetError);
      const budget = (error as ConnectionBudgetError).servers;
      expect(budget).toHaveLength(1);
      expect(budget[0]!.pools).toBe(120);
      expect(budget[0]!.databases.map((d) => d.pool)).toEqual(expect.arrayContaining([60, 60]));
      expect((error as Error).message).toMatch(
        /pools add up to 120 connections .* but it accepts 97 \(max_connections 100 - 3 reserved\)/,
      );
      const warnings: string[] = [];
      const report = await checkConnectionBudget(registry, {
        onExceeded: "warn",
        logger: { warn: (m) => warnings.push(m) },
      });
      expect(report.ok).toBe(false);
      expect(warnings).toHaveLength(1);
    } finally {
      await registry.disconnect();
    }
  });

  it("a pool given twice for one database with different sizes is a config error", () => {
    expect(() =>
      shardRegistryFromConfig(
        [
          { group: 0, member: 0, url: urls.a, pool: 5 },
          { group: 0, member: 1, url: urls.a, pool: 6 },
        ],
        { createClient: () => ({ $disconnect: async () => {} }) },
      ),
    ).toThrow(/shards\[1\]\.pool: 6 differs from the pool 5/);
    expect(() =>
      shardRegistryFromConfig([{ group: 0, member: 0, url: urls.a, pool: 0 }], {
        createClient: () => ({ $disconnect: async () => {} }),
      }),
    ).toThrow(/shards\[0\]\.pool/);
  });

  it("`pooler: true`: the database's pool is its client's, but the server's budget leaves it out; entries of one URL must agree", () => {
    const pools: number[] = [];
    const registry = shardRegistryFromConfig(
      [
        { group: 0, member: 0, url: urls.a, pool: 500, pooler: true },
        { group: 0, member: 1, url: urls.b, pool: 7 },
      ],
      {
        createClient: (_url, _shards, { pool }) => {
          pools.push(pool);
          return { $disconnect: async () => {} };
        },
      },
    );
    expect(pools).toEqual([500, 7]);
    expect(registry.databases.map((d) => d.pool)).toEqual([undefined, 7]);
    expect(() =>
      shardRegistryFromConfig(
        [
          { group: 0, member: 0, url: urls.a, pooler: true },
          { group: 0, member: 1, url: urls.a, pooler: false },
        ],
        { createClient: () => ({ $disconnect: async () => {} }) },
      ),
    ).toThrow(/shards\[1\]\.pooler: false differs from the pooler true/);
  });
});
