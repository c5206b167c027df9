import { ShardedId } from "@shardkit/id";
import { encodeCursor, InvalidCursorError } from "@shardkit/scatter";
import { afterAll, beforeEach, describe, expect, expectTypeOf, it } from "vitest";
import type { Order } from "../test/generated/prisma/client.js";
import { makeWorld, S } from "../test/world.js";
import { UnsupportedShardOperationError } from "./errors.js";
import type { ScatterPage } from "./extension.js";

// db.$scatterPage: a keyset page over every database with an opaque cursor (real PostgreSQL, 3 databases).
const world = makeWorld();
const { db } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const shards = Object.values(S);
async function addOrders(count: number, from: number) {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const shard = shards[(from + i) % shards.length]!;
    const customerId = ShardedId.generate("Customer", shard);
    await db.customer.create({ data: { id: customerId, name: `c${from + i}`, region: "x" } });
    const id = ShardedId.colocatedWith("Order", customerId);
    // Totals repeat, so the id tiebreaker decides the order inside a total.
    await db.order.create({ data: { id, customerId, status: "new", total: (from + i) % 7 } });
    ids.push(id);
  }
  return ids;
}

describe("$scatterPage", () => {
  it("pages through every database exactly while rows are added between pages", async () => {
    const original = await addOrders(30, 0);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: ScatterPage<Order> = await db.$scatterPage("order", {
        orderBy: [{ total: "desc" }],
        limit: 7,
        cursor,
      });
      expect(page.complete).toBe(true);
      seen.push(...page.rows.map((r) => r.id));
      cursor = page.nextCursor;
      if (pages++ === 1) await addOrders(10, 100); // new rows land before and after the cursor
    } while (cursor);
    // Every row that existed throughout is seen once, in the order one database would give.
    const all = await Promise.all(Object.values(world.clients).map((c) => c.order.findMany()));
    const byOrder = all.flat().sort((a, b) => b.total - a.total || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    expect(new Set(seen).size).toBe(seen.length);
    const positions = seen.map((id) => byOrder.findIndex((o) => o.id === id));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    expect(seen).toEqual(expect.arrayContaining(original));
    expect(seen.length).toBeLessThanOrEqual(40);
    expect(pages).toBeGreaterThanOrEqual(5);
  });

  it("filters by where on every database, and the rows are typed", async () => {
    await addOrders(12, 0);
    const page = await db.$scatterPage("order", {
      where: { total: { gte: 3 } },
      orderBy: { total: "asc" },
      limit: 100,
    });
    expectTypeOf(page.rows[0]!.total).toEqualTypeOf<number>();
    expect(page.rows.every((r) => r.total >= 3)).toBe(true);
    expect(page.rows.map((r) => r.total)).toEqual([...page.rows.map((r) => r.total)].sort((a, b) => a - b));
    expect(page.nextCursor).toBeNull();
  });

  it("refuses a tampered cursor before any query: garbage, another order, a wrong type, a non-UUID id", async () => {
    await addOrders(3, 0);
    const orderBy = [{ total: "desc" as const }];
    const forged = [
      "not a cursor",
      encodeCursor({ name: "x", id: ShardedId.generate("Order", S.g0m0) }, [{ name: "asc" }, { id: "asc" }]),
      encodeCursor({ total: "seven", id: ShardedId.generate("Order", S.g0m0) }, [
        { total: "desc" },
        { id: "asc" },
      ]),
      encodeCursor({ total: 1, id: "0f8fad5b-d9cb-469f-a165-70867728950e" }, [
        { total: "desc" },
        { id: "asc" },
      ]),
      encodeCursor({ total: 1, id: "'; drop table" }, [{ total: "desc" }, { id: "asc" }]),
    ];
    world.clear();
    for (const cursor of forged) {
      await expect(db.$scatterPage("order", { orderBy, limit: 5, cursor })).rejects.toBeInstanceOf(
        InvalidCursorError,
      );
    }
    expect(world.log).toEqual([]);
    // A null where the field is required: refused too (once the field is known to be required).
    const nullTotal = encodeCursor({ total: null, id: ShardedId.generate("Order", S.g0m0) }, [
      { total: "desc" },
      { id: "asc" },
    ]);
    const error = await db.$scatterPage("order", { orderBy, limit: 5, cursor: nullTotal }).catch((e) => e);
    expect(error).toBeInstanceOf(InvalidCursorError);
    expect(error.message).toMatch(/the cursor's total is null, which no row holds/);
    await expect(db.$scatterPage("order", { orderBy, limit: 0 })).rejects.toBeInstanceOf(
      UnsupportedShardOperationError,
    );
  });
});

describe("$scatterPage on the shards its where names", () => {
  it("a customer's own list is one query on the customer's database", async () => {
    const customerId = ShardedId.generate("Customer", S.g1m2);
    await db.customer.create({ data: { id: customerId, name: "one", region: "mx" } });
    for (let i = 0; i < 5; i++) {
      await db.order.create({
        data: { id: ShardedId.colocatedWith("Order", customerId), customerId, status: "new", total: i },
      });
    }
    world.clear();
    const first = await db.$scatterPage("order", {
      where: { customerId },
      orderBy: { total: "desc" },
      limit: 3,
    });
    const rest = await db.$scatterPage("order", {
      where: { customerId },
      orderBy: { total: "desc" },
      limit: 3,
      cursor: first.nextCursor,
    });
    expect([...first.rows, ...rest.rows].map((o) => o.total)).toEqual([4, 3, 2, 1, 0]);
    expect(rest.nextCursor).toBeNull();
    expect(world.landed("Order")).toEqual(["c"]);
  });
});
