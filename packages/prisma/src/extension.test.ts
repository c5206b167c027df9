import { InvalidShardedIdError, ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { makeWorld, S } from "../test/world.js";
import {
  CrossShardError,
  ShardKeyRequiredError,
  UnknownShardError,
  UnsupportedShardOperationError,
} from "./errors.js";

const world = makeWorld();
const { db } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const customerOn = async (shard: ShardIdentifier, name = "c") => {
  const id = ShardedId.generate("Customer", shard);
  await db.customer.create({ data: { id, name, region: shard.group === 0 ? "eu" : "mx" } });
  return id;
};

describe("routing single-shard operations by key", () => {
  it("create lands on the database holding the ID's shard, for all six shards", async () => {
    const expected = { "0/0": "a", "0/1": "a", "0/2": "b", "1/0": "b", "1/1": "c", "1/2": "c" } as const;
    for (const shard of Object.values(S)) {
      world.clear();
      const id = await customerOn(shard);
      expect(world.landed("Customer"), shard.key).toEqual([expected[shard.key as keyof typeof expected]]);
      // And only there: the other databases do not have the row.
      for (const [name, client] of Object.entries(world.clients)) {
        const found = await client.customer.findUnique({ where: { id } });
        expect(found === null, `${shard.key} on ${name}`).toBe(
          name !== expected[shard.key as keyof typeof expected],
        );
      }
    }
  });

  it("reads, updates, upserts and deletes by id run on that shard only", async () => {
    const id = await customerOn(S.g1m1, "before");
    world.clear();
    expect((await db.customer.findUnique({ where: { id } }))?.name).toBe("before");
    expect((await db.customer.findUniqueOrThrow({ where: { id } })).id).toBe(id);
    expect((await db.customer.findFirst({ where: { id, name: "before" } }))?.id).toBe(id);
    expect(await db.customer.findMany({ where: { id } })).toHaveLength(1);
    expect(await db.customer.count({ where: { id } })).toBe(1);
    expect((await db.customer.update({ where: { id }, data: { name: "after" } })).name).toBe("after");
    expect((await db.customer.updateMany({ where: { id }, data: { region: "us" } })).count).toBe(1);
    expect(
      (
        await db.customer.upsert({
          where: { id },
          create: { id, name: "x", region: "x" },
          update: { name: "upserted" },
        })
      ).name,
    ).toBe("upserted");
    expect(world.landed("Customer")).toEqual(["c"]);
    await db.customer.delete({ where: { id } });
    expect(await world.clients.c.customer.count()).toBe(0);
    expect(world.landed("Customer")).toEqual(["c"]);
  });

  it("aggregate and groupBy by a key field run on that shard", async () => {
    const customerId = await customerOn(S.g0m2);
    for (const balance of [5n, 7n]) {
      await db.wallet.create({
        data: { id: ShardedId.colocatedWith("Wallet", customerId), customerId, balance },
      });
    }
    world.clear();
    const agg = await db.wallet.aggregate({ where: { customerId }, _sum: { balance: true }, _count: true });
    expect(agg._sum.balance).toBe(12n);
    expect(agg._count).toBe(2);
    const groups = await db.wallet.groupBy({
      by: ["customerId"],
      where: { customerId },
      _count: { _all: true },
    });
    expect(groups).toEqual([{ customerId, _count: { _all: 2 } }]);
    expect(world.landed("Wallet")).toEqual(["b"]);
  });

  it("routes by any configured key field (a foreign key of the colocated parent)", async () => {
    const customerId = await customerOn(S.g1m2);
    const walletId = ShardedId.colocatedWith("Wallet", customerId);
    await db.wallet.create({ data: { id: walletId, customerId } });
    world.clear();
    expect(await db.wallet.findMany({ where: { customerId } })).toHaveLength(1);
    expect(await db.wallet.findFirst({ where: { AND: [{ customerId }, { balance: 0n }] } })).not.toBeNull();
    expect(world.landed("Wallet")).toEqual(["c"]);
  });

  it("the fluent API returns the relation, not the wrapper, from another database", async () => {
    const customerId = await customerOn(S.g1m1);
    await db.wallet.create({
      data: { id: ShardedId.colocatedWith("Wallet", customerId), customerId, balance: 3n },
    });
    const wallets = await db.customer.findUnique({ where: { id: customerId } }).wallets();
    expect(wallets).toHaveLength(1);
    expect(wallets?.[0]?.balance).toBe(3n);
  });
});

describe("refusing what cannot be routed", () => {
  it("keys that disagree throw CrossShardError", async () => {
    const customerId = await customerOn(S.g0m0);
    const foreign = ShardedId.generate("Wallet", S.g1m0);
    await expect(db.wallet.create({ data: { id: foreign, customerId } })).rejects.toBeInstanceOf(
      CrossShardError,
    );
    await expect(db.wallet.findFirst({ where: { id: foreign, customerId } })).rejects.toThrow(
      /keys disagree/,
    );
  });

  it("keyless operations are refused with ShardKeyRequiredError", async () => {
    await expect(db.customer.findMany()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(db.customer.findMany({ where: { name: "x" } })).rejects.toThrow(/names no shard/);
    await expect(db.customer.count()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(
      db.customer.create({ data: { id: undefined as unknown as string, name: "x", region: "x" } }),
    ).rejects.toThrow(/ShardedId.generate/);
    await expect(db.setting.findMany()).rejects.toThrow(/Setting has no shard key fields/);
    await expect(db.$queryRaw`SELECT 1`).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(db.$executeRawUnsafe("SELECT 1")).rejects.toThrow(/\$shard/);
  });

  it("an ID of a shard the registry does not have throws UnknownShardError (the default)", async () => {
    const id = ShardedId.generate("Customer", ShardIdentifier.of(7, 3));
    await expect(db.customer.findUnique({ where: { id } })).rejects.toBeInstanceOf(UnknownShardError);
    await expect(db.customer.create({ data: { id, name: "x", region: "x" } })).rejects.toThrow(
      /Shard 7\/3 is not in the registry/,
    );
    for (const client of Object.values(world.clients)) expect(await client.customer.count()).toBe(0);
  });

  it("an ID that is not a ShardedUUID (a v4 UUID) throws InvalidShardedIdError, never a default shard, naming the `legacy` option", async () => {
    const error = await db.customer
      .findUnique({ where: { id: "0f8fad5b-d9cb-469f-a165-70867728950e" } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidShardedIdError);
    expect((error as Error).message).toBe(
      'Invalid sharded ID "0f8fad5b-d9cb-469f-a165-70867728950e": version is 4, expected 7: an ID made before sharding is routed only to a shard you name for such IDs, with the extension\'s `legacy` option (every model) or `models.<Model>.legacy`',
    );
    // Not a UUID at all: the plain reason.
    await expect(db.customer.findUnique({ where: { id: "nope" } })).rejects.toThrow(
      /^Invalid sharded ID "nope": expected 36 characters/,
    );
  });

  it("db.$transaction on the routed client is refused when there are several databases", async () => {
    const id = ShardedId.generate("Customer", S.g0m0);
    await expect(
      db.$transaction(async (tx) => {
        await tx.customer.create({ data: { id, name: "x", region: "x" } });
      }),
    ).rejects.toBeInstanceOf(UnsupportedShardOperationError);
    expect(await world.clients.a.customer.count()).toBe(0);
  });
});

describe("nested writes stay on the parent's shard", () => {
  it("a nested create runs with its parent, in one database", async () => {
    const id = ShardedId.generate("Customer", S.g1m0);
    world.clear();
    await db.customer.create({
      data: {
        id,
        name: "n",
        region: "mx",
        wallets: {
          create: [
            { id: ShardedId.colocatedWith("Wallet", id) },
            { id: ShardedId.colocatedWith("Wallet", id) },
          ],
        },
      },
    });
    expect(world.landed("Wallet")).toEqual(["b"]);
    expect(await world.clients.b.wallet.count({ where: { customerId: id } })).toBe(2);
  });

  it("a nested create whose ID names another shard is refused, and nothing is written", async () => {
    const id = ShardedId.generate("Customer", S.g0m0);
    await expect(
      db.customer.create({
        data: {
          id,
          name: "n",
          region: "eu",
          wallets: { create: { id: ShardedId.generate("Wallet", S.g0m1) } },
        },
      }),
    ).rejects.toThrow(/Wallet.id names shard 0\/1, but the operation runs on shard 0\/0/);
    expect(await world.clients.a.customer.count()).toBe(0);
  });

  it("a nested connect to a row on another shard is refused", async () => {
    const other = await customerOn(S.g1m1);
    const walletId = ShardedId.generate("Wallet", S.g0m2);
    await expect(
      db.wallet.create({ data: { id: walletId, customer: { connect: { id: other } } } }),
    ).rejects.toBeInstanceOf(CrossShardError);
    const orderId = ShardedId.generate("Order", S.g1m1);
    await db.order.create({ data: { id: orderId, customerId: other, status: "new", total: 1 } });
    await expect(
      db.order.update({
        where: { id: orderId },
        data: { items: { create: { id: ShardedId.generate("OrderItem", S.g1m2), sku: "x", qty: 1 } } },
      }),
    ).rejects.toThrow(/OrderItem.id names shard 1\/2/);
  });

  it("an update that moves a key to another shard is refused", async () => {
    const customerId = await customerOn(S.g0m0);
    const walletId = ShardedId.colocatedWith("Wallet", customerId);
    await db.wallet.create({ data: { id: walletId, customerId } });
    const elsewhere = await customerOn(S.g1m1);
    await expect(
      db.wallet.update({ where: { id: walletId }, data: { customerId: elsewhere } }),
    ).rejects.toBeInstanceOf(CrossShardError);
  });
});

describe("`in` lists and createMany rows spanning shards", () => {
  it("findMany with `in` runs once per shard and merges, honouring orderBy, skip and take", async () => {
    const ids: string[] = [];
    for (const [i, shard] of [S.g0m0, S.g0m2, S.g1m1, S.g1m2, S.g0m1].entries())
      ids.push(await customerOn(shard, `n${i}`));
    world.clear();
    const all = await db.customer.findMany({ where: { id: { in: ids } }, orderBy: { name: "desc" } });
    expect(all.map((c) => c.name)).toEqual(["n4", "n3", "n2", "n1", "n0"]);
    expect(world.landed("Customer")).toEqual(["a", "b", "c"]);
    const page = await db.customer.findMany({
      where: { id: { in: ids } },
      orderBy: { name: "asc" },
      skip: 1,
      take: 2,
    });
    expect(page.map((c) => c.name)).toEqual(["n1", "n2"]);
    expect(await db.customer.count({ where: { id: { in: ids } } })).toBe(5);
    expect(
      (await db.customer.findFirst({ where: { id: { in: ids } }, orderBy: { name: "desc" } }))?.name,
    ).toBe("n4");
    expect(await db.customer.findFirst({ where: { id: { in: ids }, name: "none" } })).toBeNull();
    await expect(
      db.customer.findFirstOrThrow({ where: { id: { in: ids }, name: "none" } }),
    ).rejects.toThrow();
  });

  it("an `in` list whose shards share one database runs as one query there", async () => {
    const ids = [await customerOn(S.g0m0, "x"), await customerOn(S.g0m1, "y")];
    world.clear();
    const rows = await db.customer.findMany({ where: { id: { in: ids } }, orderBy: { name: "asc" } });
    expect(rows.map((c) => c.name)).toEqual(["x", "y"]);
    expect(world.log.filter((l) => l.sql.includes('"Customer"')).map((l) => l.db)).toEqual(["a"]);
  });

  it("aggregate with `in` adds counts and sums, compares min/max, and takes avg as merged sum / count", async () => {
    const owners = [await customerOn(S.g0m0), await customerOn(S.g1m2)];
    const walletIds: string[] = [];
    for (const [i, customerId] of owners.entries()) {
      const id = ShardedId.colocatedWith("Wallet", customerId);
      walletIds.push(id);
      await db.wallet.create({ data: { id, customerId, balance: BigInt(10 * (i + 1)) } });
    }
    const agg = await db.wallet.aggregate({
      where: { id: { in: walletIds } },
      _count: { _all: true },
      _sum: { balance: true },
      _min: { balance: true },
      _max: { balance: true },
    });
    expect(agg).toEqual({
      _count: { _all: 2 },
      _sum: { balance: 30n },
      _min: { balance: 10n },
      _max: { balance: 20n },
    });
    // Never an average of averages: each shard returns its sum and count.
    expect(await db.wallet.aggregate({ where: { id: { in: walletIds } }, _avg: { balance: true } })).toEqual({
      _avg: { balance: 15 },
    });
  });

  it("a write whose `in` list or rows span shards is refused: it would not be atomic", async () => {
    const a = await customerOn(S.g0m0);
    const b = await customerOn(S.g1m1);
    await expect(
      db.customer.updateMany({ where: { id: { in: [a, b] } }, data: { name: "z" } }),
    ).rejects.toBeInstanceOf(CrossShardError);
    await expect(
      db.customer.createMany({
        data: [
          { id: ShardedId.generate("Customer", S.g0m0), name: "x", region: "eu" },
          { id: ShardedId.generate("Customer", S.g1m0), name: "y", region: "mx" },
        ],
      }),
    ).rejects.toThrow(/\$action/);
    expect((await db.customer.findMany({ where: { id: { in: [a, b] } } })).map((c) => c.name)).toEqual([
      "c",
      "c",
    ]);
  });

  it("createMany and createManyAndReturn on one shard run there", async () => {
    const rows = [0, 1, 2].map((i) => ({
      id: ShardedId.generate("Customer", S.g1m2),
      name: `m${i}`,
      region: "mx",
    }));
    world.clear();
    expect((await db.customer.createMany({ data: rows })).count).toBe(3);
    const more = [0, 1].map((i) => ({
      id: ShardedId.generate("Customer", S.g1m1),
      name: `r${i}`,
      region: "mx",
    }));
    expect(await db.customer.createManyAndReturn({ data: more })).toHaveLength(2);
    expect(world.landed("Customer")).toEqual(["c"]);
  });
});

describe("$shard", () => {
  it("gives the client of the database holding a shard or an ID, for raw SQL and keyless models", async () => {
    const id = await customerOn(S.g1m0);
    expect(db.$shard(S.g1m0)).toBe(world.clients.b);
    expect(db.$shard(id)).toBe(world.clients.b);
    expect(db.$shard("1/1")).toBe(world.clients.c);
    const rows = await db.$shard(id).$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM "Customer"`;
    expect(rows[0]?.n).toBe(1n);
    await db.$shard(S.g0m0).setting.create({ data: { name: "k", value: "v" } });
    expect(await world.clients.a.setting.count()).toBe(1);
    expect(() => db.$shard("9/9")).toThrow(UnknownShardError);
    expect(ShardedUUID.shardOf(id)).toBe(S.g1m0);
  });
});
