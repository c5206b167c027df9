import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { checkHostileInput } from "@shardkit/test-db/hostile";
import { afterAll, beforeAll, expect, it } from "vitest";
import { auth, operator } from "./test/auth.js";
import { ordersWorld } from "./test/world.js";

// Hostile input on every route (checkHostileInput): whatever a caller sends (any path segment,
// body, query, cursor, header), the answer is a 2xx, a 4xx naming the problem, or a 503 naming the
// shard, never a 500, and an error body never carries a stack trace, SQL or a connection string.
let world: Awaited<ReturnType<typeof ordersWorld>>;
/** IDs and cursors made before the run, and credentials: an operator, `mine`, another customer. */
const known: Record<string, string> = {};
const credentials: Record<string, string> = {};
beforeAll(async () => {
  world = await ordersWorld();
  const mine = await world.customer("DE", "hostile");
  const theirs = await world.customer("MX", "hostile");
  const order = await world.order(mine, "100");
  await world.order(mine, "200");
  const page = await world.http("GET", `/customers/${mine.id}/orders?limit=1`);
  const admin = await world.http("GET", "/admin/orders?limit=1");
  Object.assign(known, {
    "my-customer": mine.id,
    "their-customer": theirs.id,
    "my-order": order.body.id,
    cursor: page.body.nextCursor,
    "admin-cursor": admin.body.nextCursor,
  });
  Object.assign(credentials, {
    operator,
    mine: await auth.issue({ role: "customer", customerId: mine.id }),
    theirs: await auth.issue({ role: "customer", customerId: theirs.id }),
  });
});
afterAll(() => world?.close());

it("no input answers 500, and no error body carries internals", { timeout: 600_000 }, async () => {
  const seen = await checkHostileInput(world.app, {
    routes: {
      "GET /health": {},
      "POST /customers": { name: "n", region: "DE", tenant: "t", currency: "EUR", creditLimit: "1000" },
      "GET /customers/:id": {},
      "POST /customers/:id/orders": { currency: "EUR", items: [{ sku: "A-1", qty: 1, unitPrice: "5" }] },
      "GET /customers/:id/orders": {},
      "POST /orders/:id/cancel": {},
      "GET /orders/:id": {},
      "GET /admin/orders": {},
      "GET /admin/totals": {},
    },
    fields: ["name", "region", "tenant", "currency", "creditLimit", "items"],
    itemFields: ["sku", "qty", "unitPrice", "x"],
    known,
    credentials,
    shardedId: (bits) => ShardedUUID.generate(ShardIdentifier.fromBits(bits)),
    // Dates and timestamps, valid, impossible, at the ends of the range, in a zone there is not.
    texts: [
      "2024-01-01",
      "2024-02-30",
      "0000-01-01T00:00Z",
      "9999-12-31T23:59:59.999Z",
      "2024-01-01T00:00+25:00",
    ],
    query: {
      names: ["limit", "cursor", "status", "from", "to", "partial"],
      values: ["placed", "true"],
      cursors: ["cursor", "admin-cursor"],
    },
    // Beside each route as an operator and without a credential: a customer on an operator's route,
    // another customer.
    examples: [
      { route: "GET /admin/orders", credential: "mine" },
      { route: "GET /customers/:id", id: "their-customer", credential: "mine" },
    ],
  });
  // The inputs reached every layer: the service's answers as well as the refusals before it.
  expect([...seen].sort()).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404]));
});
