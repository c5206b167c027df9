import { ShardedId } from "@shardkit/id";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { makeWorld, S } from "../test/world.js";
import { CrossShardError } from "./errors.js";

const world = makeWorld();
const { db, clients } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

describe("$transactionOn", () => {
  it("commits everything done through tx on that shard", async () => {
    const id = ShardedId.generate("Customer", S.g1m1);
    await db.$transactionOn(id, async (tx) => {
      await tx.customer.create({ data: { id, name: "t", region: "mx" } });
      await tx.wallet.create({
        data: { id: ShardedId.colocatedWith("Wallet", id), customerId: id, balance: 1n },
      });
    });
    expect(await clients.c.wallet.count({ where: { customerId: id } })).toBe(1);
  });

  it("routed-client calls inside the callback join the transaction (and roll back with it)", async () => {
    const id = ShardedId.generate("Customer", S.g0m2);
    await expect(
      db.$transactionOn(S.g0m2, async () => {
        await db.customer.create({ data: { id, name: "joined", region: "eu" } });
        expect(await db.customer.count()).toBe(1); // keyless inside a shard transaction: runs on it
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    expect(await clients.b.customer.count()).toBe(0);
  });

  it("a routed call returned unawaited is routed when made, inside the transaction", async () => {
    const id = ShardedId.generate("Customer", S.g0m2);
    world.clear();
    // Prisma's promises are lazy: this one starts when $transactionOn awaits it, after fn returned.
    await db.$transactionOn(S.g0m2, () => db.customer.create({ data: { id, name: "lazy", region: "eu" } }));
    const onB = () => world.log.filter((l) => l.db === "b").map((l) => l.sql.split(" ")[0]);
    expect(onB()).toEqual(["INSERT", "COMMIT"]); // Prisma's query log shows a transaction's COMMIT, not its BEGIN
    world.clear();
    await db.customer.create({
      data: { id: ShardedId.generate("Customer", S.g0m2), name: "plain", region: "eu" },
    });
    expect(onB()).toEqual(["INSERT"]);
    const other = ShardedId.generate("Customer", S.g0m0);
    await expect(
      db.$transactionOn(S.g0m2, () => db.customer.create({ data: { id: other, name: "x", region: "eu" } })),
    ).rejects.toBeInstanceOf(CrossShardError);
    expect(await clients.a.customer.count()).toBe(0);
  });

  it("retries a transaction that lost a race (a real deadlock), up to `retries` times", async () => {
    const [x, y] = [0, 1].map(() => ({
      id: ShardedId.generate("Customer", S.g0m0),
      name: "0",
      region: "eu",
    }));
    for (const data of [x!, y!]) await db.customer.create({ data });
    /** Two transactions lock x and y in opposite orders: PostgreSQL kills one of them (40P01). */
    const race = async (retries: number) => {
      let runs = 0;
      let holding = 0;
      let meet!: () => void;
      const met = new Promise<void>((resolve) => (meet = resolve));
      const lock = (first: string, second: string) =>
        db.$transactionOn(
          S.g0m0,
          async (tx) => {
            runs++;
            await tx.customer.update({ where: { id: first }, data: { name: "locked" } });
            if (++holding === 2) meet();
            await met; // both hold their first lock (on a second run this resolves at once)
            await tx.customer.update({ where: { id: second }, data: { name: "locked" } });
          },
          { retries },
        );
      const outcomes = await Promise.allSettled([lock(x!.id, y!.id), lock(y!.id, x!.id)]);
      return { runs, outcomes: outcomes.map((o) => o.status) };
    };
    const once = await race(0);
    expect(once.outcomes.sort()).toEqual(["fulfilled", "rejected"]);
    const retried = await race(2);
    expect(retried).toEqual({ runs: 3, outcomes: ["fulfilled", "fulfilled"] });
  });

  it("a query for another shard throws CrossShardError instead of running elsewhere, and rolls back", async () => {
    const id = ShardedId.generate("Customer", S.g0m0);
    const other = ShardedId.generate("Customer", S.g0m1); // same database, different shard
    world.clear();
    const error = await db
      .$transactionOn(id, async (tx) => {
        await tx.customer.create({ data: { id, name: "x", region: "eu" } });
        await tx.customer.findUnique({ where: { id: other } });
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CrossShardError);
    expect((error as Error).message).toMatch(/names shard 0\/1 inside a transaction on shard 0\/0/);
    expect(await clients.a.customer.count()).toBe(0);
    await expect(
      db.$transactionOn(id, () =>
        db.customer.findUnique({ where: { id: ShardedId.generate("Customer", S.g1m1) } }),
      ),
    ).rejects.toBeInstanceOf(CrossShardError);
    expect(world.landed("Customer")).toEqual(["a"]);
  });

  it("raw SQL through tx runs in the transaction", async () => {
    const total = await db.$transactionOn(S.g1m2, async (tx) => {
      await tx.setting.create({ data: { name: "n", value: "v" } });
      const rows = await tx.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM "Setting"`;
      return rows[0]?.n;
    });
    expect(total).toBe(1n);
  });

  it("a nested $transactionOn for the same shard joins; for another shard it throws", async () => {
    const id = ShardedId.generate("Customer", S.g1m0);
    await db.$transactionOn(id, async () => {
      await db.$transactionOn(id, (tx) => tx.customer.create({ data: { id, name: "nested", region: "mx" } }));
      await expect(db.$transactionOn(S.g1m1, async () => undefined)).rejects.toBeInstanceOf(CrossShardError);
    });
    expect(await clients.b.customer.count()).toBe(1);
  });
});
