import { ShardedUUID } from "@shardkit/id";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCustomerSelector, REGIONS } from "./customer-selector.js";
import type { Order } from "./generated/prisma/client.js";
import { ordersWorld } from "./test/world.js";

let world: Awaited<ReturnType<typeof ordersWorld>>;
beforeAll(async () => {
  world = await ordersWorld();
});
afterAll(() => world.close());

/** One customer on each of the four shards (the last one lives on the second server). */
async function customerPerShard(limit: string) {
  const selector = createCustomerSelector(world.shards.registry.shards);
  const byShard = new Map<string, { id: string; currency: string }>();
  for (let t = 0; byShard.size < 4 && t < 500; t++) {
    const region = t % 2 === 0 ? REGIONS.mx[0]! : REGIONS.eu[t % REGIONS.eu.length]!;
    const tenant = `credit-${t}`;
    const shard = selector.select({ region, tenant }).key;
    if (byShard.has(shard)) continue;
    byShard.set(shard, await world.customer(region, tenant, limit));
  }
  expect([...byShard.keys()].sort()).toEqual(["0/0", "0/1", "1/0", "1/1"]);
  return [...byShard.values()];
}

async function openTotal(customerId: string) {
  const orders = await world.all<Order>("order");
  return orders
    .filter((o) => o.customerId === customerId && o.status === "placed")
    .reduce((sum, o) => sum + o.total, 0n);
}

describe("the credit limit holds under concurrency", () => {
  it("25 concurrent orders of 7.00 per customer, limit 100.00, on every shard at once: exactly 14 each", async () => {
    const customers = await customerPerShard("10000");
    const started = performance.now();
    const results = await Promise.all(
      customers.flatMap((c) =>
        Array.from({ length: 25 }, () => world.untilAnswered((key) => world.order(c, "700", 1, key))),
      ),
    );
    const elapsedMs = performance.now() - started;
    for (const [i, c] of customers.entries()) {
      const mine = results.slice(i * 25, i * 25 + 25);
      const statuses = mine.map((r) => r.status);
      expect(
        statuses.filter((s) => s === 201),
        ShardedUUID.shardOf(c.id).key,
      ).toHaveLength(14);
      expect(statuses.filter((s) => s === 409)).toHaveLength(11);
      for (const r of mine.filter((x) => x.status === 409))
        expect(r.body.error).toBe("CREDIT_LIMIT_EXCEEDED");
      expect(await openTotal(c.id)).toBe(9800n);
    }
    // Refused placements wrote nothing: one order.placed event per order.
    const orders = await world.all<Order>("order");
    expect(orders).toHaveLength(56);
    expect(await world.all("outboxEvent")).toHaveLength(56);
    console.log(`100 concurrent placements on 4 shards (3 databases): ${Math.round(elapsedMs)} ms`);
  });

  it("orders of mixed sizes and cancels racing each other never take a customer over its limit", async () => {
    const [c] = await customerPerShard("50000");
    const sizes = [4900, 1200, 7700, 300, 9999, 2500, 100, 6100, 3300, 800, 5000, 4400, 2000, 700, 8800];
    const first = await Promise.all(
      sizes.map((s) => world.untilAnswered((key) => world.order(c!, s, 1, key))),
    );
    const placedFirst = first.filter((r) => r.status === 201);
    const used = placedFirst.reduce((sum, r) => sum + BigInt(r.body.total), 0n);
    expect(used).toBe(await openTotal(c!.id));
    expect(used <= 50000n).toBe(true);
    // Without cancels the open total only grows, so a refusal that was right when it was decided
    // still is: no refused size fits in what is left.
    const refused = sizes.filter((_, i) => first[i]!.status === 409);
    expect(refused.length).toBeGreaterThan(0);
    for (const size of refused) expect(used + BigInt(size) > 50000n, `size ${size}`).toBe(true);
    // Cancel half of the placed orders while more orders arrive.
    const cancels = placedFirst
      .slice(0, Math.ceil(placedFirst.length / 2))
      .map((r) =>
        world.untilAnswered((key) => world.http("POST", `/orders/${r.body.id}/cancel`, undefined, key)),
      );
    const more = sizes.map((s) => world.untilAnswered((key) => world.order(c!, s, 1, key)));
    const second = await Promise.all([...cancels, ...more]);
    expect(second.every((r) => r.status === 200 || r.status === 201 || r.status === 409)).toBe(true);
    expect(await openTotal(c!.id)).toBeLessThanOrEqual(50000n);
  });
});
