import { randomUUID } from "node:crypto";
import { everyRow, httpClient, patient } from "@shardkit/test-db";
import { inject } from "vitest";
import { buildApp } from "../app.js";
import { OrderService } from "../order-service.js";
import { openShards } from "../shards.js";
import { auth, operator } from "./auth.js";

/** The orders service on the test's PostgreSQL shards, emptied, with an HTTP client over inject(). */
export async function ordersWorld() {
  const shards = await openShards({ shardsJson: inject("shardsJson"), log: () => {} });
  for (const physical of shards.registry.databases) {
    await physical.client.$executeRawUnsafe(
      'TRUNCATE "OrderItem", "Order", "Customer", "OutboxEvent", "ProcessedEvent", "IdempotencyKey"',
    );
  }
  // Reads across shards wait for each database as long as a busy host needs: what these tests check
  // is what is answered, not how fast (a stopped server is refused at once, whatever the deadline).
  // A command past its deadline is a 503, which the tests send again (`untilAnswered`).
  const service = new OrderService(shards, { scatterDeadlineMs: patient(10_000) });
  const app = buildApp(service, { auth });
  /** A request as `token`'s holder (default: an operator; null: no credential), under a new Idempotency-Key. */
  const http = httpClient(app, { token: operator });
  /** A customer (EUR unless the region is MX) with the given credit limit in minor units. */
  async function customer(region: string, tenant: string, creditLimit = "1000000") {
    const currency = region === "MX" ? "MXN" : "EUR";
    const res = await http("POST", "/customers", {
      name: `${region}-${tenant}`,
      region,
      tenant,
      currency,
      creditLimit,
    });
    if (res.status !== 201) throw new Error(`customer: ${JSON.stringify(res.body)}`);
    return { id: res.body.id as string, currency };
  }
  /** Places an order of `qty` x `unitPrice` of one SKU; returns the HTTP response. */
  function order(c: { id: string; currency: string }, unitPrice: string | number, qty = 1, key?: string) {
    return http(
      "POST",
      `/customers/${c.id}/orders`,
      { currency: c.currency, items: [{ sku: "SKU-1", qty, unitPrice }] },
      key ?? randomUUID(),
    );
  }
  /**
   * `send(key)` under one Idempotency-Key, sent again while the answer is 503 (a shard past its
   * deadline on a busy host), as a client honouring Retry-After does: the key makes a repeat safe,
   * so the answer is the command's own (at most `attempts` tries; then the last 503).
   */
  async function untilAnswered(send: (key: string) => ReturnType<typeof http>, attempts = 20) {
    const key = randomUUID();
    for (let attempt = 1; ; attempt++) {
      const res = await send(key);
      if (res.status !== 503 || attempt === attempts) return res;
    }
  }
  /** Every row of a table on every database. */
  const all = <T>(table: "customer" | "order" | "orderItem" | "outboxEvent" | "idempotencyKey") =>
    everyRow<T>(shards.registry, table);
  /** Rows of every table on every database (to check that a refused call wrote nothing). */
  async function countRows() {
    let n = 0;
    for (const table of ["customer", "order", "orderItem", "outboxEvent", "idempotencyKey"] as const)
      n += (await all(table)).length;
    return n;
  }
  return {
    shards,
    service,
    app,
    http,
    customer,
    order,
    untilAnswered,
    all,
    countRows,
    async close() {
      await app.close();
      await shards.close();
    },
  };
}
