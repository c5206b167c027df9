import { ShardedId, ShardedUUID } from "@shardkit/id";
import { createOutboxRelay, type OutboxMessage } from "@shardkit/prisma";
import { customersOnEveryShard } from "@shardkit/service-kit/customers";
import { withClusterStopped } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCustomerSelector } from "./customer-selector.js";
import type { Order } from "./generated/prisma/client.js";
import { ordersWorld } from "./test/world.js";

const SECOND = inject("second"); // the run's own second server, which the tests stop
const secondSkipped = inject("secondSkipped"); // why the tests that stop the second server cannot run, or ""
let world: Awaited<ReturnType<typeof ordersWorld>>;
const customers: { id: string; currency: string }[] = [];
beforeAll(async () => {
  world = await ordersWorld();
  // Two customers on each of the four shards (shard 1/1 lives on the second server).
  const selector = createCustomerSelector(world.shards.registry.shards);
  const { placements, perShard } = customersOnEveryShard(selector, { shards: 4, perShard: 2, prefix: "bo" });
  for (const { region, tenant } of placements)
    customers.push(await world.customer(region, tenant, "100000000"));
  expect([...perShard.values()]).toEqual([2, 2, 2, 2]);
});
afterAll(() => world.close());

/** The back office's order: createdAt desc, then id desc. */
const newestFirst = (a: Order, b: Order) =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

let n = 0;
const placeOne = async () => {
  const c = customers[n++ % customers.length]!;
  const [price, qty] = [100 + (n % 17), 1 + (n % 3)];
  // Sent again under its key while the answer is 503 (a transaction race lost every retry, or a shard
  // late on a busy host), as a client honouring Retry-After does: the list is the test's subject.
  const res = await world.untilAnswered((key) => world.order(c, price, qty, key));
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
};

type Page = { orders: Order[]; nextCursor: string | null; complete: boolean; missing: string[] };
async function page(query: string): Promise<Page> {
  const res = await world.http("GET", `/admin/orders?${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

describe("back-office list across shards", () => {
  it("stays exact while orders are placed concurrently: every order that existed once, in order; new ones never after page 1", async () => {
    for (let i = 0; i < 6; i++) await Promise.all(Array.from({ length: 8 }, placeOne));
    // Some cancelled, so a status filter has something to leave out.
    const existing = (await world.all<Order>("order")).sort(newestFirst);
    for (const o of existing.filter((_, i) => i % 5 === 0)) {
      expect((await world.http("POST", `/orders/${o.id}/cancel`)).status).toBe(200);
    }
    const before = (await world.all<Order>("order")).sort(newestFirst);
    expect(before).toHaveLength(48);

    // Placements go on in the background for the whole paging, and a few more commit between
    // every two pages, so each page is read after new orders on every shard.
    const placedDuring: string[] = [];
    let stop = false;
    const background = (async () => {
      while (!stop && placedDuring.length < 150) placedDuring.push(await placeOne()); // bounded
    })();
    const pages: string[][] = [];
    let cursor: string | null = null;
    try {
      do {
        const p = await page(`limit=5${cursor ? `&cursor=${cursor}` : ""}`);
        expect(p.complete).toBe(true);
        expect(p.missing).toEqual([]);
        pages.push(p.orders.map((o) => o.id));
        cursor = p.nextCursor;
        for (let i = 0; i < 4; i++) placedDuring.push(await placeOne());
      } while (cursor);
    } finally {
      stop = true;
      await background;
    }

    const seen = pages.flat();
    const existed = new Set(before.map((o) => o.id));
    expect(new Set(seen).size).toBe(seen.length); // nothing twice
    expect(seen.filter((id) => existed.has(id))).toEqual(before.map((o) => o.id)); // all, once, in order
    for (const later of pages.slice(1)) expect(later.filter((id) => !existed.has(id))).toEqual([]);
    expect(placedDuring.length).toBeGreaterThanOrEqual(pages.length * 4);
    const shardsWritten = new Set(placedDuring.map((id) => ShardedUUID.shardOf(id).key));
    expect(shardsWritten.size).toBe(4);
    console.log(
      `back office: ${before.length} orders in ${pages.length} pages of 5 while ${placedDuring.length} were placed`,
    );
  });

  it("filters by status and period, exactly, across shards", async () => {
    const all = (await world.all<Order>("order")).sort(newestFirst);
    const from = all[Math.floor(all.length * 0.7)]!.createdAt;
    const to = all[Math.floor(all.length * 0.2)]!.createdAt;
    const expected = all.filter((o) => o.status === "placed" && o.createdAt >= from && o.createdAt < to);
    expect(expected.length).toBeGreaterThan(5);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const p = await page(
        `status=placed&from=${from.toISOString()}&to=${to.toISOString()}&limit=4${cursor ? `&cursor=${cursor}` : ""}`,
      );
      seen.push(...p.orders.map((o) => o.id));
      cursor = p.nextCursor;
    } while (cursor);
    expect(seen).toEqual(expected.map((o) => o.id));
    const cancelled = await page("status=cancelled&limit=200");
    expect(cancelled.orders.map((o) => o.id)).toEqual(
      all.filter((o) => o.status === "cancelled").map((o) => o.id),
    );
  });
});

/** Totals per day, status and currency computed by each database in SQL, then summed here. */
async function sqlTotals(databases = world.shards.registry.databases, from?: Date, to?: Date) {
  const sums = new Map<string, { count: number; total: bigint }>();
  for (const physical of databases) {
    const rows = await physical.client.$queryRawUnsafe<
      { day: string; status: string; currency: string; count: number; total: string }[]
    >(
      `SELECT to_char("placedDay", 'YYYY-MM-DD') AS day, status, currency, count(*)::int AS count, sum(total)::text AS total
       FROM "Order" WHERE ($1::timestamptz IS NULL OR "createdAt" >= $1) AND ($2::timestamptz IS NULL OR "createdAt" < $2)
       GROUP BY 1, 2, 3`,
      from ?? null,
      to ?? null,
    );
    for (const r of rows) {
      const key = `${r.day} ${r.status} ${r.currency}`;
      const acc = sums.get(key) ?? { count: 0, total: 0n };
      sums.set(key, { count: acc.count + r.count, total: acc.total + BigInt(r.total) });
    }
  }
  return [...sums].map(([key, v]) => `${key} ${v.count} ${v.total}`).sort();
}
const apiTotals = (body: {
  totals: { day: string; status: string; currency: string; count: number; total: string }[];
}) => body.totals.map((t) => `${t.day} ${t.status} ${t.currency} ${t.count} ${t.total}`).sort();

describe("totals per day and status across shards", () => {
  it("equal a direct SQL computation on each database, summed", async () => {
    // Orders of earlier days, written straight into their shard (as if placed then).
    const days = ["2026-11-27", "2026-11-28", "2026-11-29"];
    for (const [i, c] of customers.entries()) {
      for (const [d, day] of days.entries()) {
        if ((i + d) % 3 === 2) continue;
        const id = ShardedId.colocatedWith("Order", c.id);
        await world.shards.db.order.create({
          data: {
            id,
            customerId: c.id,
            status: d === 1 && i % 2 === 0 ? "cancelled" : "placed",
            total: BigInt(1000 * (i + 1) + d),
            currency: c.currency,
            createdAt: new Date(`${day}T${String(10 + i).padStart(2, "0")}:00:00Z`),
            placedDay: new Date(`${day}T00:00:00Z`),
          },
        });
      }
    }
    const res = await world.http("GET", "/admin/totals");
    expect(res.status).toBe(200);
    expect(res.body.complete).toBe(true);
    expect(res.body.missing).toEqual([]);
    expect(apiTotals(res.body)).toEqual(await sqlTotals());
    const groups = new Set(res.body.totals.map((t: { day: string }) => t.day));
    expect(groups.size).toBeGreaterThanOrEqual(4);
    expect(res.body.totals.some((t: { status: string }) => t.status === "cancelled")).toBe(true);
    expect(new Set(res.body.totals.map((t: { currency: string }) => t.currency))).toEqual(
      new Set(["EUR", "MXN"]),
    );

    const from = new Date("2026-11-28T00:00:00Z");
    const to = new Date("2026-11-29T13:00:00Z");
    const window = await world.http("GET", `/admin/totals?from=2026-11-28&to=${to.toISOString()}`);
    expect(apiTotals(window.body)).toEqual(await sqlTotals(undefined, from, to));
    expect(window.body.totals.map((t: { day: string }) => t.day)).not.toContain("2026-11-27");
  });
});

describe("a shard's server down", () => {
  it("fails with 503 naming the missing shards, or answers partially saying so; never a silently short list", async ({
    skip,
  }) => {
    skip(secondSkipped !== "", secondSkipped);
    const fullList = await page("limit=200");
    let newest = "";
    const fullTotals = (await world.http("GET", "/admin/totals")).body;
    const second = world.shards.registry.databases.filter((p) => p.shards.some((s) => s.key === "1/1"));
    const others = world.shards.registry.databases.filter((p) => !second.includes(p));
    expect(second.map((p) => p.shards.map((s) => s.key))).toEqual([["1/1"]]);
    const onOtherShards = (o: Order) => ShardedUUID.shardOf(o.id).key !== "1/1";

    await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
      const failed = await world.http("GET", "/admin/orders?limit=10");
      expect(failed.status).toBe(503);
      expect(failed.body).toMatchObject({ error: "SHARD_UNAVAILABLE", missing: ["1/1"] });
      expect(failed.body.message).toMatch(/shards 1\/1 did not answer/);
      const failedTotals = await world.http("GET", "/admin/totals");
      expect([failedTotals.status, failedTotals.body.missing]).toEqual([503, ["1/1"]]);

      const partial = await page("limit=50&partial=true");
      expect(partial.complete).toBe(false);
      expect(partial.missing).toEqual(["1/1"]);
      expect(partial.nextCursor).toBeNull(); // a cursor from a partial page would skip 1/1's rows for good
      // Exactly the first 50 orders of the other shards, in order.
      const expected = fullList.orders.filter(onOtherShards).slice(0, 50);
      expect(expected).toHaveLength(50);
      expect(partial.orders.map((o) => o.id)).toEqual(expected.map((o) => o.id));
      const partialTotals = await world.http("GET", "/admin/totals?partial=true");
      expect(partialTotals.status).toBe(200);
      expect([partialTotals.body.complete, partialTotals.body.missing]).toEqual([false, ["1/1"]]);
      expect(apiTotals(partialTotals.body)).toEqual(await sqlTotals(others));

      // Work that stays on a shard that is up goes on.
      const up = customers.find((c) => ShardedUUID.shardOf(c.id).key === "0/0")!;
      const placedMeanwhile = await world.order(up, 100);
      expect(placedMeanwhile.status).toBe(201);
      newest = placedMeanwhile.body.id;
      const down = customers.find((c) => ShardedUUID.shardOf(c.id).key === "1/1")!;
      const refused = await world.order(down, 100);
      expect([refused.status, refused.body.error, refused.body.shard]).toEqual([
        503,
        "SHARD_UNAVAILABLE",
        "1/1",
      ]);
      const read = await world.http("GET", `/customers/${down.id}/orders`);
      expect([read.status, read.body.shard]).toEqual([503, "1/1"]);
    });

    // The server is back: complete answers again.
    let back = await world.http("GET", "/admin/orders?limit=200");
    for (let i = 0; i < 20 && back.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 250));
      back = await world.http("GET", "/admin/orders?limit=200");
    }
    expect(back.body.complete).toBe(true);
    expect(back.body.orders[0].id).toBe(newest);
    expect(back.body.orders.slice(1, 100).map((o: Order) => o.id)).toEqual(
      fullList.orders.slice(0, 99).map((o) => o.id),
    );
    expect((await world.http("GET", "/admin/totals")).body.totals.length).toBe(fullTotals.totals.length);
  });
});

describe("outbox", () => {
  it("the relay delivers every order.placed and order.cancelled event once", async () => {
    const c = customers[3]!;
    const placed = (await world.order(c, 250)).body.id;
    expect((await world.http("POST", `/orders/${placed}/cancel`)).status).toBe(200);
    const events = await world.all<{ id: string; topic: string; aggregateId: string }>("outboxEvent");
    const orders = await world.all<Order>("order");
    const created = orders.filter((o) => o.createdAt.getTime() === ShardedUUID.timestampOf(o.id)); // placed through the API
    expect(events.filter((e) => e.topic === "order.placed")).toHaveLength(created.length);
    expect(events.filter((e) => e.topic === "order.cancelled")).toHaveLength(
      created.filter((o) => o.status === "cancelled").length,
    );

    const delivered: OutboxMessage[] = [];
    const relay = createOutboxRelay({
      registry: world.shards.registry,
      batchSize: 25,
      deliver: async (m) => {
        delivered.push(m);
      },
    });
    const lagBefore = await relay.lag();
    expect(lagBefore.reduce((s, l) => s + (l.pending ?? Number.NaN), 0)).toBe(events.length);
    for (let i = 0; i < 50; i++) {
      const report = await relay.runOnce();
      if (report.databases.every((d) => d.claimed === 0)) break;
    }
    expect(delivered.map((m) => m.id).sort()).toEqual(events.map((e) => e.id).sort());
    expect((await relay.lag()).every((l) => l.pending === 0 && l.dead === 0)).toBe(true);
    const cancelled = delivered.find((m) => m.topic === "order.cancelled" && m.aggregateId === placed)!;
    expect(cancelled.payload).toEqual({
      orderId: placed,
      customerId: c.id,
      total: 250n,
      currency: c.currency,
    });
    expect(cancelled.shard).toBe(ShardedUUID.shardOf(placed));
    await relay.runOnce();
    expect(delivered).toHaveLength(events.length);
  });
});
