import { ShardedId, ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import { ScatterError } from "@shardkit/scatter";
import { patient, withClusterStopped } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { makeWorld, models, S } from "../test/world.js";
import {
  RoutingOptionsError,
  ScatterRefusedError,
  ShardKeyRequiredError,
  UnsupportedShardOperationError,
} from "./errors.js";
import { shardRouting } from "./extension.js";
import type { ScatterReport } from "./scatter/options.js";
import { isShardUnavailable } from "./unavailable.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const world = makeWorld();
const { db: refusing, clients, registry } = world;
/** The same world with keyless reads scattering (Wallet: at most 2 databases, and a limit required). */
const db = clients.a.$extends(
  shardRouting({
    registry,
    models: {
      ...models,
      Wallet: { ...models.Wallet, keyless: { mode: "scatter", maxShards: 2, requireLimit: true } },
    },
    keyless: "scatter",
  }),
);
afterAll(() => world.close());
beforeEach(() => world.truncate());

const shards = Object.values(S);
/** Six customers on the six shards (three databases), names out of shard order. */
async function seed() {
  const names = ["delta", "alpha", "echo", "bravo", "foxtrot", "charlie"];
  const rows = shards.map((shard, i) => ({
    id: ShardedId.generate("Customer", shard) as string,
    name: names[i]!,
    region: shard.group === 0 ? "eu" : "mx",
  }));
  for (const row of rows) await refusing.customer.create({ data: row });
  const wallets: { id: string; customerId: string; balance: bigint; label: string | null }[] = [];
  for (const [i, c] of rows.entries()) {
    for (const j of [0, 1]) {
      const wallet = {
        id: ShardedId.colocatedWith("Wallet", c.id) as string,
        customerId: c.id,
        balance: BigInt((i * 7 + j * 3) % 10),
        label: j === 0 ? null : `w${i % 3}`,
      };
      wallets.push(wallet);
      await refusing.wallet.create({ data: wallet });
    }
  }
  world.clear();
  return { customers: rows, wallets };
}

const sorted = (list: bigint[]) => [...list].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

describe("keyless reads scatter over every database when the policy says so", () => {
  it("findMany: each database sorted and cut at skip + take, merged in order, the same as one database", async () => {
    const { customers } = await seed();
    const all = await db.customer.findMany({ orderBy: { name: "asc" } });
    expect(all.map((c) => c.name)).toEqual([...customers].sort(byName).map((c) => c.name));
    expect(world.landed("Customer")).toEqual(["a", "b", "c"]);
    // every database got orderBy with the id tiebreaker and take = skip + take, no skip
    const sql = world.log.filter((e) => e.sql.includes('"Customer"')).map((e) => e.sql);
    world.clear();
    expect(sql.every((q) => /ORDER BY .*"name" ASC, .*"id" ASC/.test(q))).toBe(true);
    const page = await db.customer.findMany({
      orderBy: { name: "desc" },
      skip: 1,
      take: 2,
      select: { id: true },
    });
    const expected = [...customers].sort(byName).reverse().slice(1, 3);
    expect(page).toEqual(expected.map((c) => ({ id: c.id }))); // name was fetched for the merge, then dropped
    const perDb = world.log.filter((e) => e.sql.includes('"Customer"')).map((e) => e.sql);
    expect(perDb).toHaveLength(3);
    expect(perDb.every((q) => /ORDER BY .*"name" DESC, .*"id" ASC LIMIT/.test(q))).toBe(true);
  });

  it("findFirst is a findMany of one; findFirstOrThrow raises Prisma's not-found error", async () => {
    const { customers } = await seed();
    expect((await db.customer.findFirst({ orderBy: { name: "desc" } }))?.name).toBe("foxtrot");
    expect((await db.customer.findFirst({ orderBy: { name: "asc" }, skip: 2 }))?.name).toBe("charlie");
    expect(await db.customer.findFirst({ where: { name: "none" } })).toBeNull();
    await expect(db.customer.findFirstOrThrow({ where: { name: "none" } })).rejects.toMatchObject({
      code: "P2025",
    });
    expect(
      (await db.customer.findFirstOrThrow({ where: { region: "mx" }, orderBy: { name: "asc" } })).id,
    ).toBe(customers.filter((c) => c.region === "mx").sort(byName)[0]!.id);
  });

  it("a Prisma cursor ({ id }) is read on its own shard and becomes a keyset filter on every database", async () => {
    const { customers } = await seed();
    const sorted = [...customers].sort(byName);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await db.customer.findMany({
        orderBy: { name: "asc" },
        take: 2,
        ...(cursor ? { cursor: { id: cursor }, skip: 1 } : {}),
      });
      if (page.length === 0) break;
      seen.push(...page.map((c) => c.name));
      cursor = page[page.length - 1]!.id;
    }
    expect(seen).toEqual(sorted.map((c) => c.name));
    // Prisma's cursor includes the cursor row itself
    const from = await db.customer.findMany({ orderBy: { name: "asc" }, cursor: { id: sorted[3]!.id } });
    expect(from.map((c) => c.name)).toEqual(sorted.slice(3).map((c) => c.name));
  });

  it("count, aggregate (avg = merged sum / count) and groupBy merge exactly", async () => {
    const { customers, wallets } = await seed();
    expect(await db.customer.count()).toBe(6);
    expect(await db.customer.count({ where: { region: "eu" } })).toBe(3);
    expect(await db.customer.count({ skip: 2, take: 3 })).toBe(3);
    expect(await db.customer.count({ skip: 5, take: 3 })).toBe(1);
    const wallet = db.$scatter({ maxShards: 3 }).wallet; // Wallet's own guard allows 2 databases
    expect(await wallet.count({ select: { _all: true, label: true } })).toEqual({ _all: 12, label: 6 });
    const balances = wallets.map((w) => w.balance);
    const sum = balances.reduce((s, b) => s + b, 0n);
    const agg = await wallet.aggregate({
      _count: true,
      _sum: { balance: true },
      _avg: { balance: true },
      _min: { balance: true, label: true },
      _max: { balance: true },
    });
    expect(agg).toEqual({
      _count: 12,
      _sum: { balance: sum },
      _avg: { balance: Number(sum) / 12 },
      _min: { balance: sorted(balances)[0], label: "w0" },
      _max: { balance: sorted(balances).at(-1) },
    });
    const groups = await db.customer.groupBy({
      by: ["region"],
      _count: { _all: true },
      orderBy: { region: "desc" },
    });
    expect(groups).toEqual([
      { region: "mx", _count: { _all: 3 } },
      { region: "eu", _count: { _all: 3 } },
    ]);
    // ordered by an aggregate that is not selected, then cut
    const top = await wallet.groupBy({
      by: ["customerId"],
      _sum: { balance: true },
      orderBy: [{ _max: { balance: "desc" } }, { customerId: "asc" }],
      take: 2,
    });
    const perCustomer = customers.map((c) => {
      const own = wallets.filter((w) => w.customerId === c.id).map((w) => w.balance);
      return {
        customerId: c.id,
        sum: own.reduce((s, b) => s + b, 0n),
        max: sorted(own).at(-1)!,
      };
    });
    perCustomer.sort((x, y) =>
      x.max !== y.max ? (x.max > y.max ? -1 : 1) : x.customerId < y.customerId ? -1 : 1,
    );
    expect(top).toEqual(
      perCustomer.slice(0, 2).map((p) => ({ customerId: p.customerId, _sum: { balance: p.sum } })),
    );
  });

  it("what cannot be merged exactly is refused with UnsupportedShardOperationError", async () => {
    await seed();
    const refused = [
      () => db.customer.findMany({ distinct: ["region"] }),
      () => db.customer.findMany({ take: -2 }),
      () => db.customer.findMany({ orderBy: { wallets: { _count: "desc" } } }),
      () => db.customer.findMany({ cursor: { name: "x" } as never }),
      () => db.customer.groupBy({ by: ["region"], _count: { _all: true }, having: { region: "eu" } }),
      () => db.customer.aggregate({ _count: true, take: 2 }),
      () => db.customer.count({ cursor: { id: ShardedId.generate("Customer", S.g0m0) } }),
    ];
    for (const run of refused) await expect(run()).rejects.toBeInstanceOf(UnsupportedShardOperationError);
  });

  it("keyless writes, keyless models and findUnique are never scattered", async () => {
    await seed();
    await expect(
      db.customer.updateMany({ where: { region: "eu" }, data: { name: "x" } }),
    ).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(db.customer.deleteMany()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(db.setting.findMany()).rejects.toThrow(/Setting has no shard key fields/);
    expect(await db.customer.count({ where: { name: "x" } })).toBe(0);
  });
});

describe("the guard, per model and per call", () => {
  it("refuses a scatter wider than maxShards, or without a limit, before any query runs", async () => {
    await seed();
    await expect(db.wallet.findMany({ take: 5 })).rejects.toSatisfy(
      (e) => e instanceof ScatterRefusedError && e.reason === "maxShards" && /3 databases/.test(e.message),
    );
    await expect(db.wallet.count()).rejects.toBeInstanceOf(ScatterRefusedError);
    expect(world.landed("Wallet")).toEqual([]);
    // explicit per-call override
    expect(await db.$scatter({ maxShards: 3 }).wallet.count()).toBe(12);
    await expect(db.$scatter({ maxShards: 3 }).wallet.findMany()).rejects.toSatisfy(
      (e) => e instanceof ScatterRefusedError && e.reason === "requireLimit",
    );
    expect(await db.$scatter({ maxShards: 3, requireLimit: false }).wallet.findMany()).toHaveLength(12);
    // the guard of one model does not touch another
    expect(await db.customer.findMany()).toHaveLength(6);
  });

  it("$scatter(options) turns keyless reads of a refusing client into scatters, for the calls through its view only", async () => {
    const { customers } = await seed();
    await expect(refusing.customer.findMany()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    const view = refusing.$scatter();
    expect((await view.customer.findMany({ orderBy: { name: "asc" } })).map((c) => c.id)).toEqual(
      [...customers].sort(byName).map((c) => c.id),
    );
    // keyed operations through the view still route by key, and the client itself still refuses
    expect((await view.customer.findUnique({ where: { id: customers[4]!.id } }))?.name).toBe("foxtrot");
    await expect(refusing.customer.count()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    const [inside, outside] = await Promise.allSettled([view.customer.count(), refusing.customer.count()]);
    expect(inside).toEqual({ status: "fulfilled", value: 6 });
    expect(outside.status).toBe("rejected");
    expect(() => refusing.$scatter({ policy: "maybe" as never })).toThrow(RoutingOptionsError);
  });

  it("rejects bad keyless settings when the extension is built", () => {
    expect(() => shardRouting({ registry, keyless: "sometimes" as never })).toThrow(/keyless: expected/);
    expect(() =>
      shardRouting({ registry, models: { Wallet: { keyless: { mode: "scatter", maxShards: 0 } } } }),
    ).toThrow(/models.Wallet.keyless.maxShards/);
  });
});

describe("a database that is down (its PostgreSQL server stopped)", () => {
  it(
    "'fail' throws ScatterError naming its shards; 'partial' returns the other rows and reports them missing",
    async () => {
      const { customers } = await seed();
      const onC = (shard: ShardIdentifier) => shard.key === "1/1" || shard.key === "1/2";
      const reports: ScatterReport[] = [];
      const partial = db.$scatter({
        policy: "partial",
        deadlineMs: 10_000,
        onReport: (r) => reports.push(r),
      });
      await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
        const failed = await db.customer.findMany({ orderBy: { name: "asc" } }).catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(ScatterError);
        expect((failed as ScatterError).code).toBe("TARGETS_FAILED");
        expect((failed as ScatterError).message).toContain('"1/1,1/2 (database #2)"');
        expect((failed as ScatterError).missing.map((m) => m.key)).toEqual(["1/1,1/2 (database #2)"]);

        const rows = await partial.customer.findMany({ orderBy: { name: "asc" } });
        expect(rows.map((c) => c.id)).toEqual(
          customers
            .filter((c) => !onC(ShardedUUID.shardOf(c.id)))
            .sort(byName)
            .map((c) => c.id),
        );
        expect(await partial.customer.count()).toBe(4);

        // A page says what it lacks, and hands out no cursor that would skip the missing rows later.
        const page = await db.$scatterPage(
          "customer",
          { orderBy: { name: "asc" }, limit: 3 },
          { policy: "partial" },
        );
        expect(page.complete).toBe(false);
        expect(page.missingShards.map((s) => s.key)).toEqual(["1/1", "1/2"]);
        expect(page.nextCursor).toBeNull();
        expect(page.rows).toHaveLength(3);
        await expect(
          db.$scatterPage("customer", { orderBy: { name: "asc" }, limit: 3 }),
        ).rejects.toBeInstanceOf(ScatterError);
      });
      expect(reports).toHaveLength(2);
      for (const report of reports) {
        expect(report.complete).toBe(false);
        expect(report.missing.map((m) => m.key)).toEqual(["1/1,1/2 (database #2)"]);
        expect(report.missingShards.map((s) => s.key)).toEqual(["1/1", "1/2"]);
        expect(report.targets.map((t) => t.status)).toEqual(["fulfilled", "fulfilled", "missing"]);
      }
      // the server is back: the same view returns everything and reports complete
      expect(await partial.customer.count()).toBe(6);
      expect(reports[2]?.complete).toBe(true);
    },
    patient(60_000),
  );
});

describe("a database that refuses the query itself", () => {
  it("fails the read with the database's own error, not as a missing shard, whatever the policy", async () => {
    await seed();
    const partial = db.$scatter({ policy: "partial" });
    for (const read of [
      () => db.customer.findMany({ where: { id: { gt: "not a uuid" } }, orderBy: { name: "asc" } }),
      () => partial.customer.findMany({ where: { id: { gt: "not a uuid" } }, orderBy: { name: "asc" } }),
      () => partial.customer.count({ where: { id: { gt: "not a uuid" } } }),
    ]) {
      const error = await read().catch((e: unknown) => e);
      expect(error).not.toBeInstanceOf(ScatterError);
      expect(isShardUnavailable(error)).toBe(false);
      expect((error as Error).message).toMatch(/uuid/i);
    }
  });
});
