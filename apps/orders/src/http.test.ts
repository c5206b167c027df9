import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Order, OrderItem } from "./generated/prisma/client.js";
import { auth, bearer, operator } from "./test/auth.js";
import { ordersWorld } from "./test/world.js";

let world: Awaited<ReturnType<typeof ordersWorld>>;
beforeAll(async () => {
  world = await ordersWorld();
});
afterAll(() => world.close());

describe("customers and orders", () => {
  it("places a customer by region and tenant, and colocates its orders and items", async () => {
    const mx = await world.http("POST", "/customers", {
      name: "Carla",
      region: "MX",
      tenant: "acme",
      currency: "MXN",
      creditLimit: "500000",
    });
    expect(mx.status).toBe(201);
    expect(mx.body.creditLimit).toBe("500000");
    const shard = ShardedUUID.shardOf(mx.body.id);
    expect(shard.group).toBe(1);
    const placed = await world.http("POST", `/customers/${mx.body.id}/orders`, {
      currency: "MXN",
      items: [
        { sku: "LP-14", qty: 1, unitPrice: "149900" },
        { sku: "CB-03", qty: 3, unitPrice: 1800 },
      ],
    });
    expect(placed.status).toBe(201);
    expect(placed.body).toMatchObject({ status: "placed", total: "155300", currency: "MXN" });
    expect(ShardedUUID.shardOf(placed.body.id)).toBe(shard);
    expect(placed.body.items.map((i: OrderItem) => [i.sku, i.qty, i.unitPrice])).toEqual([
      ["LP-14", 1, "149900"],
      ["CB-03", 3, "1800"],
    ]);
    for (const item of placed.body.items) expect(ShardedUUID.shardOf(item.id)).toBe(shard);
    expect(new Date(placed.body.createdAt).getTime()).toBe(ShardedUUID.timestampOf(placed.body.id));
    expect(placed.body.placedDay.slice(0, 10)).toBe(placed.body.createdAt.slice(0, 10));

    const got = await world.http("GET", `/orders/${placed.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(placed.body);
    // The order, its items and its order.placed event are on the customer's shard, in its database.
    const own = world.shards.registry.clientFor(shard);
    expect(await own.orderItem.count({ where: { orderId: placed.body.id } })).toBe(2);
    const [event] = await own.outboxEvent.findMany({ where: { aggregateId: placed.body.id } });
    expect(event?.topic).toBe("order.placed");
    expect(ShardedUUID.shardOf(event!.id)).toBe(shard);
  });

  it("refuses a region no rule serves, with nothing written", async () => {
    const before = await world.countRows();
    const res = await world.http("POST", "/customers", {
      name: "X",
      region: "US",
      tenant: "t",
      currency: "USD",
      creditLimit: "100",
    });
    expect([res.status, res.body.error]).toEqual([422, "REGION_NOT_SERVED"]);
    expect(await world.countRows()).toBe(before);
  });

  it("cancels a placed order once, with an order.cancelled event; the freed credit can be used again", async () => {
    const c = await world.customer("DE", "cancel", "1000");
    const first = await world.order(c, "800");
    expect(first.status).toBe(201);
    const refused = await world.order(c, "300");
    expect([refused.status, refused.body.error]).toEqual([409, "CREDIT_LIMIT_EXCEEDED"]);
    expect(refused.body.message).toMatch(/has 800 of 1000 in open orders; this order needs 300/);
    const cancel = await world.http("POST", `/orders/${first.body.id}/cancel`);
    expect(cancel.status).toBe(200);
    expect(cancel.body.status).toBe("cancelled");
    expect(cancel.body.cancelledAt).toEqual(expect.any(String));
    const again = await world.http("POST", `/orders/${first.body.id}/cancel`);
    expect([again.status, again.body.error]).toEqual([409, "ORDER_NOT_OPEN"]);
    expect((await world.order(c, "300")).status).toBe(201);
    const events = (await world.all<{ aggregateId: string; topic: string }>("outboxEvent"))
      .filter((e) => e.aggregateId === first.body.id)
      .map((e) => e.topic)
      .sort();
    expect(events).toEqual(["order.cancelled", "order.placed"]);
  });

  it("lists a customer's orders newest first, page by page, on its shard alone", async () => {
    const c = await world.customer("FR", "pages");
    const other = await world.customer("FR", "pages"); // same tenant: same shard, other customer
    const placed: string[] = [];
    for (let i = 0; i < 7; i++) {
      placed.push((await world.order(c, 100 + i)).body.id);
      await world.order(other, 5);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await world.http(
        "GET",
        `/customers/${c.id}/orders?limit=3${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(res.status).toBe(200);
      expect(res.body.orders.length).toBeLessThanOrEqual(3);
      seen.push(...res.body.orders.map((o: Order) => o.id));
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual([...placed].reverse());
    expect(pages).toBe(3);
    const empty = await world.customer("IT", "none");
    expect((await world.http("GET", `/customers/${empty.id}/orders`)).body).toEqual({
      orders: [],
      nextCursor: null,
    });
    const missing = await world.http(
      "GET",
      `/customers/${ShardedId.generate("Customer", ShardIdentifier.of(0, 0))}/orders`,
    );
    expect([missing.status, missing.body.error]).toEqual([404, "NOT_FOUND"]);
    const bad = await world.http("GET", `/customers/${c.id}/orders?cursor=garbage`);
    expect([bad.status, bad.body.message]).toEqual([400, "cursor: not a cursor of this list"]);
  });
});

describe("idempotency keys", () => {
  it("placing: a retry replays the recorded order; the key with another body is a conflict", async () => {
    const c = await world.customer("NL", "idem");
    const none = await world.order(c, "5", 1, "");
    expect([none.status, none.body.error]).toEqual([400, "IDEMPOTENCY_KEY_REQUIRED"]);
    const first = await world.order(c, "500", 2, "place-key-1");
    expect(first.status).toBe(201);
    const retry = await world.order(c, "500", 2, "place-key-1");
    expect(retry.status).toBe(201);
    expect(retry.headers["idempotent-replayed"]).toBe("true");
    expect(retry.body).toEqual(first.body);
    const before = await world.countRows();
    const conflict = await world.order(c, "501", 2, "place-key-1");
    expect([conflict.status, conflict.body.error]).toEqual([409, "IDEMPOTENCY_CONFLICT"]);
    expect(await world.countRows()).toBe(before);
    expect((await world.http("GET", `/customers/${c.id}/orders`)).body.orders).toHaveLength(1);
  });

  it("concurrent retries of one placement make one order", async () => {
    const c = await world.customer("PT", "idem-race");
    const results = await Promise.all(
      Array.from({ length: 8 }, () => world.order(c, "70", 1, "race-key-01")),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(results.filter((r) => r.headers["idempotent-replayed"] !== "true")).toHaveLength(1);
    expect((await world.http("GET", `/customers/${c.id}/orders`)).body.orders).toHaveLength(1);
  });

  it("cancelling: a retry replays the recorded cancel; the key on another order is a conflict", async () => {
    const c = await world.customer("IE", "idem-cancel");
    const a = (await world.order(c, "10")).body.id;
    const b = (await world.order(c, "20")).body.id;
    const first = await world.http("POST", `/orders/${a}/cancel`, undefined, "cancel-key-1");
    expect(first.status).toBe(200);
    const retry = await world.http("POST", `/orders/${a}/cancel`, undefined, "cancel-key-1");
    expect(retry.status).toBe(200);
    expect(retry.headers["idempotent-replayed"]).toBe("true");
    expect(retry.body).toEqual(first.body);
    const before = await world.countRows();
    const conflict = await world.http("POST", `/orders/${b}/cancel`, undefined, "cancel-key-1");
    expect([conflict.status, conflict.body.error]).toEqual([409, "IDEMPOTENCY_CONFLICT"]);
    expect(await world.countRows()).toBe(before);
    expect((await world.http("GET", `/orders/${b}`)).body.status).toBe("placed");
    const events = (await world.all<{ aggregateId: string; topic: string }>("outboxEvent")).filter(
      (e) => e.aggregateId === a && e.topic === "order.cancelled",
    );
    expect(events).toHaveLength(1);
    const none = await world.http("POST", `/orders/${b}/cancel`, undefined, null);
    expect([none.status, none.body.error]).toEqual([400, "IDEMPOTENCY_KEY_REQUIRED"]);
  });
});

describe("bad input gets a clear 4xx and writes nothing", () => {
  it("a body giving a key twice is 400 naming the key (an item's too)", async () => {
    const c = await world.customer("DE", "dup");
    const before = await world.countRows();
    const res = await world.app.inject({
      method: "POST",
      url: `/customers/${c.id}/orders`,
      headers: {
        "idempotency-key": `dup-key-${Date.now()}`,
        "content-type": "application/json",
        ...bearer(operator),
      },
      payload: '{"currency":"EUR","items":[{"sku":"A","qty":1,"qty":900,"unitPrice":"1"}]}',
    });
    expect([res.statusCode, res.json().message]).toEqual([
      400,
      "items.qty: given twice in the body (each key once)",
    ]);
    expect(await world.countRows()).toBe(before);
  });

  it("NUL characters and lone surrogates anywhere in a request are 400 naming the field", async () => {
    const c = await world.customer("DE", "text");
    const before = await world.countRows();
    const res = await world.http("POST", `/customers/${c.id}/orders`, {
      currency: "EUR",
      items: [{ sku: "A\u0000", qty: 1, unitPrice: "1" }],
    });
    expect([res.status, res.body.message]).toEqual([
      400,
      "body.items.0.sku: must not contain NUL characters",
    ]);
    const lone = await world.http("POST", "/customers", {
      name: "\uD800",
      region: "DE",
      tenant: "t",
      currency: "EUR",
      creditLimit: "1",
    });
    expect(lone.status).toBe(400);
    expect(await world.countRows()).toBe(before);
  });

  it("a body with 60,000 unknown keys gets a small error", async () => {
    const body: Record<string, unknown> = {
      name: "n",
      region: "DE",
      tenant: "t",
      currency: "EUR",
      creditLimit: "1",
    };
    for (let i = 0; i < 60_000; i++) body[`k${i}`] = 0;
    const res = await world.http("POST", "/customers", body);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body).length).toBeLessThan(2500);
  });

  const item = { sku: "SKU-1", qty: 1, unitPrice: "100" };
  /** An order of `item` with `change`. */
  const oneItem = (change: Record<string, unknown>) => ({ currency: "EUR", items: [{ ...item, ...change }] });
  it.each([
    ["negative price", oneItem({ unitPrice: -5 }), /items.0.unitPrice: must be a positive integer/],
    ["zero price", oneItem({ unitPrice: "0" }), /items.0.unitPrice: must be greater than 0/],
    ["fractional price", oneItem({ unitPrice: 1.5 }), /items.0.unitPrice: must be a positive integer/],
    ["decimal string", oneItem({ unitPrice: "12.50" }), /items.0.unitPrice: must be a positive integer/],
    [
      "huge price",
      oneItem({ unitPrice: "99999999999999999" }),
      /items.0.unitPrice: must be at most 1000000000000/,
    ],
    ["zero qty", oneItem({ qty: 0 }), /items.0.qty: must be a whole number from 1 to 10000/],
    ["fractional qty", oneItem({ qty: 2.5 }), /items.0.qty: must be a whole number/],
    ["qty as text", oneItem({ qty: "2" }), /items.0.qty: must be a whole number/],
    [
      "huge total",
      oneItem({ qty: 10_000, unitPrice: "1000000000" }),
      /items: the order's total .* must be at most 1000000000000/,
    ],
    ["no items", { currency: "EUR", items: [] }, /items: must hold at least one item/],
    ["items missing", { currency: "EUR" }, /items: must be a list/],
    ["duplicate sku", { currency: "EUR", items: [item, item] }, /items.1.sku: SKU-1 is listed twice/],
    ["bad sku", oneItem({ sku: "" }), /items.0.sku: must be 1 to 64/],
    ["bad currency", { currency: "euro", items: [item] }, /currency: must be an ISO 4217 code/],
    ["extra field", { currency: "EUR", items: [item], note: "x" }, /Unrecognized key/],
    ["extra item field", oneItem({ discount: 1 }), /items.0: Unrecognized key/],
  ])("%s", async (_label, body, message) => {
    const c = await world.customer("DE", "bad");
    const before = await world.countRows();
    const res = await world.http("POST", `/customers/${c.id}/orders`, body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("VALIDATION");
    expect(res.body.message).toMatch(message);
    expect(await world.countRows()).toBe(before);
  });

  it("customers: bad credit limit, currency or region", async () => {
    const before = await world.countRows();
    const base = { name: "N", region: "DE", tenant: "t", currency: "EUR", creditLimit: "100" };
    for (const [patch, message] of [
      [{ creditLimit: "-1" }, /creditLimit: must be a positive integer/],
      [{ creditLimit: 0 }, /creditLimit: must be greater than 0/],
      [{ creditLimit: "10000000000000" }, /creditLimit: must be at most/],
      [{ currency: "eur" }, /currency: must be an ISO 4217 code/],
      [{ region: "Germany" }, /region: must be an ISO 3166 country code/],
    ] as const) {
      const res = await world.http("POST", "/customers", { ...base, ...patch });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect(await world.countRows()).toBe(before);
  });

  it("an order in another currency than the customer's is refused", async () => {
    const c = await world.customer("MX", "cur");
    const before = await world.countRows();
    const res = await world.http("POST", `/customers/${c.id}/orders`, {
      currency: "EUR",
      items: [{ sku: "A", qty: 1, unitPrice: "1" }],
    });
    expect([res.status, res.body.error]).toEqual([422, "CURRENCY_MISMATCH"]);
    expect(res.body.message).toMatch(/orders in MXN, not EUR/);
    // The one row written is the refusal, recorded under its Idempotency-Key for retries.
    expect(await world.countRows()).toBe(before + 1);
    const keys = await world.all<{ response: string | null }>("idempotencyKey");
    expect(keys.filter((k) => /"refusal".*CURRENCY_MISMATCH/.test(k.response ?? ""))).toHaveLength(1);
  });

  it("malformed and unknown IDs", async () => {
    const before = await world.countRows();
    const body = { currency: "EUR", items: [{ sku: "A", qty: 1, unitPrice: "1" }] };
    const malformed = await world.http("POST", "/customers/not-an-id/orders", body);
    expect([malformed.status, malformed.body.error, malformed.body.message]).toEqual([
      400,
      "VALIDATION",
      "customer: not a valid ID",
    ]);
    const v4 = await world.http("GET", "/orders/0f8fad5b-d9cb-469f-a165-70867728950e");
    expect([v4.status, v4.body.message]).toEqual([400, "order: not a valid ID"]);
    const unknownShard = await world.http(
      "POST",
      `/customers/${ShardedId.generate("Customer", ShardIdentifier.of(9, 9))}/orders`,
      body,
    );
    expect([unknownShard.status, unknownShard.body.error]).toEqual([404, "NOT_FOUND"]);
    const missingCustomer = await world.http(
      "POST",
      `/customers/${ShardedId.generate("Customer", ShardIdentifier.of(0, 1))}/orders`,
      body,
    );
    expect([missingCustomer.status, missingCustomer.body.error]).toEqual([404, "NOT_FOUND"]);
    const missingOrder = await world.http(
      "POST",
      `/orders/${ShardedId.generate("Order", ShardIdentifier.of(1, 1))}/cancel`,
    );
    expect([missingOrder.status, missingOrder.body.error]).toEqual([404, "NOT_FOUND"]);
    // Malformed and unknown-shard IDs are refused before any transaction; the two NOT_FOUND
    // answers decided on a shard are recorded under their keys (a retry gets the same answer).
    expect(await world.countRows()).toBe(before + 2);
  });

  it("back-office queries: bad status, dates, limits and cursors", async () => {
    for (const [query, message] of [
      ["status=shipped", /status: must be placed or cancelled/],
      ["from=yesterday", /from: must be a date/],
      ["from=2026-02-30", /from: must be a date/],
      ["to=2026-11-30T12:00:00", /to: must be a date .* or a timestamp with a zone/],
      ["from=2026-12-01&to=2026-11-01", /to: must be later than from/],
      ["from=0000-01-01", /from: must be in year 1 or later/],
      ["to=0000-12-31T23:00:00Z", /to: must be in year 1 or later/],
      ["limit=0", /limit/],
      ["limit=500", /limit/],
      ["partial=yes", /partial: must be true or false/],
      ["cursor=garbage", /cursor: not a cursor of this list/],
      ["sort=asc", /Unrecognized key/],
    ] as const) {
      const res = await world.http("GET", `/admin/orders?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.message, query).toMatch(message);
    }
    // A well-formed cursor for this list with a date PostgreSQL (through Prisma) cannot take, or a
    // non-UUID id: refused as a bad cursor, never passed to the databases (where it would fail
    // as if the shards were down).
    const forge = (createdAt: string, id: string) =>
      Buffer.from(
        JSON.stringify({
          v: 1,
          k: [
            ["createdAt", "desc", "first"],
            ["id", "desc", "first"],
          ],
          p: [
            ["d", createdAt],
            ["s", id],
          ],
        }),
      ).toString("base64url");
    const id = ShardedId.generate("Order", ShardIdentifier.of(0, 0));
    const real = await world.http("GET", `/admin/orders?cursor=${forge("2026-11-30T00:00:00.000Z", id)}`);
    expect(real.status).toBe(200); // the forgery is well-formed: the refusals below are about its values
    for (const cursor of [
      forge("0000-01-01T00:00:00.000Z", id),
      forge("-004000-01-01T00:00:00.000Z", id),
      forge("2026-11-30T00:00:00.000Z", "x'; --"),
    ]) {
      const res = await world.http("GET", `/admin/orders?cursor=${cursor}`);
      expect([res.status, res.body.message]).toEqual([400, "cursor: not a cursor of this list"]);
    }
    const totals = await world.http("GET", "/admin/totals?from=2026-12-01&to=2026-12-01");
    expect([totals.status, totals.body.message]).toEqual([400, "to: must be later than from"]);
  });
});

describe("GET /health", () => {
  it("lists each shard with its database and state", async () => {
    const res = await world.http("GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("ok");
    expect(res.body.shards.map((s: { shard: string; state: string }) => [s.shard, s.state])).toEqual([
      ["0/0", "up"],
      ["0/1", "up"],
      ["1/0", "up"],
      ["1/1", "up"],
    ]);
    // 1/1's database: on the second server (or on the main one where the tests may not make it).
    expect(res.body.shards[3].database).toBe(JSON.parse(inject("shardsJson"))[3].url);
  });
});

describe("credentials", () => {
  it("every route but /health answers 401 without a valid credential", async () => {
    const c = await world.customer("DE", "anon");
    const placed = await world.order(c, "100");
    const routes: ["GET" | "POST", string, unknown][] = [
      ["POST", "/customers", { name: "x", region: "DE", tenant: "x", currency: "EUR", creditLimit: "1" }],
      ["GET", `/customers/${c.id}`, undefined],
      [
        "POST",
        `/customers/${c.id}/orders`,
        { currency: "EUR", items: [{ sku: "A", qty: 1, unitPrice: "1" }] },
      ],
      ["GET", `/customers/${c.id}/orders`, undefined],
      ["POST", `/orders/${placed.body.id}/cancel`, {}],
      ["GET", `/orders/${placed.body.id}`, undefined],
      ["GET", "/admin/orders", undefined],
      ["GET", "/admin/totals", undefined],
    ];
    const expired = await auth.issue({ role: "admin", subject: "tests" }, "-1m");
    for (const token of [null, "garbage", `${operator.slice(0, -2)}xx`, expired]) {
      for (const [method, url, body] of routes) {
        const res = await world.http(method, url, body, undefined, token);
        expect([url, res.status, res.body.error]).toEqual([url, 401, "UNAUTHENTICATED"]);
      }
    }
    expect((await world.http("GET", "/health", undefined, null, null)).status).toBe(200);
    expect((await world.http("GET", `/orders/${placed.body.id}`)).body.status).toBe("placed");
  });

  it("a customer reaches only itself and its own orders; another's answer 404; the back office 403", async () => {
    const ana = await world.customer("DE", "ana");
    const bo = await world.customer("DE", "bo");
    const boOrder = (await world.order(bo, "100")).body.id as string;
    const asAna = await auth.issue({ role: "customer", customerId: ana.id });
    const mine = await world.http(
      "POST",
      `/customers/${ana.id}/orders`,
      { currency: "EUR", items: [{ sku: "A", qty: 1, unitPrice: "250" }] },
      undefined,
      asAna,
    );
    expect(mine.status).toBe(201);
    expect((await world.http("GET", `/orders/${mine.body.id}`, undefined, null, asAna)).status).toBe(200);
    expect((await world.http("GET", `/customers/${ana.id}/orders`, undefined, null, asAna)).status).toBe(200);
    for (const [method, url, body] of [
      ["GET", `/customers/${bo.id}`, undefined],
      [
        "POST",
        `/customers/${bo.id}/orders`,
        { currency: "EUR", items: [{ sku: "A", qty: 1, unitPrice: "1" }] },
      ],
      ["GET", `/customers/${bo.id}/orders`, undefined],
      ["GET", `/orders/${boOrder}`, undefined],
      ["POST", `/orders/${boOrder}/cancel`, {}],
    ] as const) {
      const res = await world.http(method, url, body, undefined, asAna);
      expect([url, res.status, res.body.error]).toEqual([url, 404, "NOT_FOUND"]);
    }
    for (const url of ["/admin/orders", "/admin/totals"]) {
      const res = await world.http("GET", url, undefined, null, asAna);
      expect([url, res.status, res.body.error]).toEqual([url, 403, "FORBIDDEN"]);
    }
    expect((await world.http("GET", `/orders/${boOrder}`)).body.status).toBe("placed");
  });
});

describe("a real listening port", () => {
  it("serves the same API over HTTP", async () => {
    const base = await world.app.listen({ port: 0, host: "127.0.0.1" });
    const post = (path: string, body: unknown, key: string) =>
      fetch(`${base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key, ...bearer(operator) },
        body: JSON.stringify(body),
      });
    const customer = await post(
      "/customers",
      { name: "Net", region: "ES", tenant: "net", currency: "EUR", creditLimit: 10_000 },
      "port-test-customer",
    );
    expect(customer.status).toBe(201);
    const { id } = (await customer.json()) as { id: string };
    const placed = await post(
      `/customers/${id}/orders`,
      { currency: "EUR", items: [{ sku: "NET-1", qty: 2, unitPrice: "2500" }] },
      "port-test-order",
    );
    expect(placed.status).toBe(201);
    const order = (await placed.json()) as { id: string; total: string };
    expect(order.total).toBe("5000");
    const got = await fetch(`${base}/orders/${order.id}`, { headers: bearer(operator) });
    expect(((await got.json()) as { id: string }).id).toBe(order.id);
  });
});
