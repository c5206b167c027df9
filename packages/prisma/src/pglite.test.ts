import { PGlite } from "@electric-sql/pglite";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { models } from "../test/world.js";
import { CrossShardError, ShardKeyRequiredError, UnknownShardError } from "./errors.js";
import { createShardRegistry, shardRouting } from "./index.js";
import { rolloutSchema } from "./rollout.js";

const schema = new URL("../test/schema.prisma", import.meta.url).pathname;
const s = (g: number, m: number) => ShardIdentifier.of(g, m);

async function pgliteWorld(layout: ShardIdentifier[][]) {
  const dbs = layout.map(() => new PGlite());
  await rolloutSchema({
    schema,
    targets: dbs.map((db, i) => ({ name: `pglite-${i}`, adapter: new PrismaPGlite(db) })),
    onProgress: () => {},
  });
  const clients = dbs.map((db) => new PrismaClient({ adapter: new PrismaPGlite(db) }));
  const registry = createShardRegistry({
    shards: layout.flatMap((shards, i) => shards.map((shard) => ({ shard, client: clients[i]! }))),
  });
  const db = clients[0]!.$extends(shardRouting({ registry, models }));
  return {
    db,
    clients,
    close: async () => {
      await registry.disconnect();
      for (const pglite of dbs) await pglite.close();
    },
  };
}

describe("embedded PGlite shards: four shards in two groups on two databases", () => {
  let world: Awaited<ReturnType<typeof pgliteWorld>>;
  beforeAll(async () => {
    world = await pgliteWorld([
      [s(0, 0), s(0, 1)],
      [s(1, 0), s(1, 1)],
    ]);
  });
  afterAll(() => world.close());

  it("routes by key, refuses keyless work and runs one action per shard", async () => {
    const { db, clients } = world;
    const eu = ShardedId.generate("Customer", s(0, 1));
    const mx = ShardedId.generate("Customer", s(1, 0));
    await db.customer.create({ data: { id: eu, name: "eu", region: "eu" } });
    await db.customer.create({ data: { id: mx, name: "mx", region: "mx" } });
    expect(await clients[0]!.customer.count()).toBe(1);
    expect(await clients[1]!.customer.count()).toBe(1);
    expect(
      (await db.customer.findMany({ where: { id: { in: [eu, mx] } }, orderBy: { name: "asc" } })).map(
        (c) => c.name,
      ),
    ).toEqual(["eu", "mx"]);
    await expect(db.customer.findMany()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(
      db.$action((unit) => {
        unit.update("customer", { where: { id: eu }, data: { name: "x" } });
        unit.update("customer", { where: { id: mx }, data: { name: "y" } });
      }),
    ).rejects.toBeInstanceOf(CrossShardError);
    await db.$action(
      (unit) => {
        unit.update("customer", { where: { id: eu }, data: { name: "eu2" } });
        unit.update("customer", { where: { id: mx }, data: { name: "mx2" } });
      },
      { allowCrossShard: true },
    );
    expect((await db.customer.findUnique({ where: { id: mx } }))?.name).toBe("mx2");
  });
});

describe("single-database mode: every shard in one database behaves like the plain client", () => {
  let world: Awaited<ReturnType<typeof pgliteWorld>>;
  beforeAll(async () => {
    world = await pgliteWorld([[ShardIdentifier.DEFAULT, s(0, 1), s(0, 2), s(0, 3)]]);
  });
  afterAll(() => world.close());

  it("keyless queries, raw SQL, $transaction and the fluent API run on the one database", async () => {
    const { db } = world;
    const id = ShardedId.generate("Customer", ShardIdentifier.DEFAULT);
    await db.customer.create({ data: { id, name: "solo", region: "eu" } });
    expect(await db.customer.findMany()).toHaveLength(1);
    expect(await db.customer.count({ where: { name: "solo" } })).toBe(1);
    await db.setting.create({ data: { name: "k", value: "v" } });
    const rows = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM "Customer"`;
    expect(rows[0]?.n).toBe(1);
    await expect(
      db.$transaction(async (tx) => {
        await tx.customer.update({ where: { id }, data: { name: "rolled back" } });
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    expect((await db.customer.findUnique({ where: { id } }))?.name).toBe("solo");
    await db.wallet.create({
      data: { id: ShardedId.colocatedWith("Wallet", id), customerId: id, balance: 2n },
    });
    expect(await db.customer.findUnique({ where: { id } }).wallets()).toHaveLength(1);
  });

  it("still refuses an ID of a shard it does not hold", async () => {
    await expect(
      world.db.customer.findUnique({ where: { id: ShardedId.generate("Customer", s(4, 4)) } }),
    ).rejects.toBeInstanceOf(UnknownShardError);
  });
});
