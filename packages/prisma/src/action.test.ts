import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { newCustomer, walletOf } from "../test/layout.js";
import { makeWorld, S } from "../test/world.js";
import { CrossShardError, PartialCommitError, ShardKeyRequiredError, UnknownShardError } from "./errors.js";

const world = makeWorld();
const { db, clients } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const countAll = async () => {
  let n = 0;
  for (const client of Object.values(clients))
    n += (await client.customer.count()) + (await client.wallet.count());
  return n;
};

describe("$action: one unit of work, grouped by shard", () => {
  it("one shard: all staged writes commit in one transaction, results readable afterwards", async () => {
    const customer = newCustomer(S.g1m1);
    world.clear();
    let staged!: ReturnType<typeof stage>;
    const stage = (unit: Parameters<Parameters<typeof db.$action>[0]>[0]) => ({
      customer: unit.create("customer", { data: customer }),
      wallet: unit.create("wallet", {
        data: { id: ShardedId.colocatedWith("Wallet", customer.id), customerId: customer.id, balance: 100n },
      }),
    });
    const returned = await db.$action((unit) => {
      staged = stage(unit);
      expect(staged.customer.status).toBe("staged");
      return "done";
    });
    expect(returned).toBe("done");
    expect(staged.customer.status).toBe("committed");
    expect(staged.wallet.result.balance).toBe(100n);
    expect(world.log.map((l) => l.db)).toEqual(["c", "c", "c"]); // two INSERTs and one COMMIT, all on c
    expect(world.log.filter((l) => l.sql === "COMMIT").map((l) => l.db)).toEqual(["c"]);
  });

  it("cross_shard_action_throws_by_default", async () => {
    await expect(
      db.$action((unit) => {
        unit.create("customer", { data: newCustomer(S.g0m0) });
        unit.create("customer", { data: newCustomer(S.g1m1) });
      }),
    ).rejects.toBeInstanceOf(CrossShardError);
  });

  it("nothing_persisted_when_rejected", async () => {
    world.clear();
    const error = await db
      .$action((unit) => {
        unit.create("customer", { data: newCustomer(S.g0m0) });
        unit.create("customer", { data: newCustomer(S.g0m1) }); // same database, different shard: still refused
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CrossShardError);
    expect((error as CrossShardError).shards.map((s) => s.key)).toEqual(["0/0", "0/1"]);
    expect(world.log).toEqual([]); // not one statement reached a database
    expect(await countAll()).toBe(0);
  });

  it("cross_shard_allowed persists each shard, one transaction per database, in database order", async () => {
    const rows = [newCustomer(S.g1m2, "late"), newCustomer(S.g0m2, "early"), newCustomer(S.g1m0, "middle")];
    world.clear();
    await db.$action(
      (unit) => {
        for (const data of rows) unit.create("customer", { data });
      },
      { allowCrossShard: true },
    );
    const inserts = world.log.filter((l) => l.sql.startsWith("INSERT")).map((l) => l.db);
    expect(inserts).toEqual(["b", "b", "c"]); // 0/2 (bits 2) and 1/0 (bits 64) on b, then 1/2 on c
    // 0/2 and 1/0 share database b: they commit together, so two transactions in all.
    expect(world.log.filter((l) => l.sql === "COMMIT")).toHaveLength(2);
    expect(await clients.b.customer.count()).toBe(2);
    expect(await clients.c.customer.count()).toBe(1);
  });

  it("partial_commit_keeps_committed_shard_and_reports_failed", async () => {
    const first = newCustomer(S.g0m0, "kept");
    const orphanOwner = ShardedId.generate("Customer", S.g1m0); // never created: the FK insert fails
    const third = newCustomer(S.g1m2, "never");
    const error = await db
      .$action(
        (unit) => {
          unit.create("customer", { data: first });
          unit.create("wallet", walletOf(orphanOwner));
          unit.create("customer", { data: third });
        },
        { allowCrossShard: true },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialCommitError);
    const partial = error as PartialCommitError;
    expect(partial.committed.map((s) => s.key)).toEqual(["0/0"]);
    expect(partial.failed.map((f) => f.shard.key)).toEqual(["1/0"]);
    expect(String(partial.failed[0]?.error)).toMatch(/Foreign key constraint/i);
    expect(partial.notAttempted.map((s) => s.key)).toEqual(["1/2"]);
    expect(partial.message).toMatch(/committed \[0\/0\], failed \[1\/0\], not attempted \[1\/2\]/);
    expect(await clients.a.customer.findUnique({ where: { id: first.id } })).not.toBeNull();
    expect(await clients.b.wallet.count()).toBe(0);
    expect(await clients.c.customer.count()).toBe(0);
  });

  it("a failing single-shard action rolls back and rethrows the original error", async () => {
    const customer = newCustomer(S.g0m2);
    const owner = ShardedId.generate("Customer", S.g0m2);
    const error = await db
      .$action((unit) => {
        unit.create("customer", { data: customer });
        unit.create("wallet", walletOf(owner));
      })
      .catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(PartialCommitError);
    expect(String(error)).toMatch(/Foreign key constraint/i);
    expect(await clients.b.customer.count()).toBe(0);
  });

  it("unknown_shard_fails_by_default, at staging time", async () => {
    await expect(
      db.$action((unit) => {
        unit.create("customer", { data: newCustomer(ShardIdentifier.of(9, 9)) });
      }),
    ).rejects.toBeInstanceOf(UnknownShardError);
    expect(await countAll()).toBe(0);
  });

  it("keyless staged writes are refused; direct writes inside an action are refused; reads run", async () => {
    await expect(
      db.$action((unit) => {
        unit.updateMany("customer", { where: { name: "x" }, data: { name: "y" } });
      }),
    ).rejects.toBeInstanceOf(ShardKeyRequiredError);
    const existing = newCustomer(S.g1m0);
    await db.customer.create({ data: existing });
    await expect(
      db.$action(async () => {
        await db.customer.create({ data: newCustomer(S.g1m0) });
      }),
    ).rejects.toThrow(/stage it/);
    const read = await db.$action(async (unit) => {
      const found = await db.customer.findUnique({ where: { id: existing.id } });
      unit.update("customer", { where: { id: existing.id }, data: { name: `${found?.name}!` } });
      return found?.name;
    });
    expect(read).toBe("c");
    expect((await db.customer.findUnique({ where: { id: existing.id } }))?.name).toBe("c!");
  });

  it("a step runs inside its shard's transaction and can veto it (balance check)", async () => {
    const customer = newCustomer(S.g0m1);
    const walletId = ShardedId.colocatedWith("Wallet", customer.id);
    await db.customer.create({ data: customer });
    await db.wallet.create({ data: { id: walletId, customerId: customer.id, balance: 10n } });
    const withdraw = (amount: bigint) =>
      db.$action((unit) => {
        unit.update("wallet", { where: { id: walletId }, data: { balance: { decrement: amount } } });
        return unit.on(walletId, async (tx) => {
          const wallet = await tx.wallet.findUniqueOrThrow({ where: { id: walletId } });
          if (wallet.balance < 0n) throw new Error("insufficient funds");
          return wallet.balance;
        });
      });
    expect((await withdraw(4n)).result).toBe(6n);
    await expect(withdraw(7n)).rejects.toThrow("insufficient funds");
    expect((await db.wallet.findUnique({ where: { id: walletId } }))?.balance).toBe(6n);
  });

  it("createMany rows spanning shards split into one write per shard when cross-shard is allowed", async () => {
    const rows = [newCustomer(S.g0m0), newCustomer(S.g0m0), newCustomer(S.g1m1)];
    const result = await db.$action((unit) => unit.createMany("customer", { data: rows }), {
      allowCrossShard: true,
    });
    expect(result.shards.map((s) => s.key)).toEqual(["0/0", "1/1"]);
    expect(result.result).toEqual({ count: 3 });
    expect(await clients.a.customer.count()).toBe(2);
    expect(await clients.c.customer.count()).toBe(1);
  });
});
