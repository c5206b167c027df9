// The demo (`demo` script): starts the orders service on embedded PGlite shards (or
// the PostgreSQL shards in SHARDKIT_SHARDS), drives a scenario over real HTTP and shows where
// every row lives, the back office's list and totals across shards, and the outbox.
import { randomBytes, randomUUID } from "node:crypto";
import { ShardedUUID } from "@shardkit/id";
import { createOutboxRelay, type OutboxMessage } from "@shardkit/prisma";
import { openDemoShards, say } from "@shardkit/service-kit/demo";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { OrderService } from "./order-service.js";
import { openShards } from "./shards.js";

const shards = await openDemoShards(openShards);
const service = new OrderService(shards);
// A stand-in for the downstream consumers (fulfilment, invoicing): it only collects what the relay delivers.
const delivered: OutboxMessage[] = [];
const relay = createOutboxRelay({
  registry: shards.registry,
  deliver: async (m) => {
    delivered.push(m);
  },
});
// Credentials: the demo acts as an operator (the back office); a customer's own token reaches only
// its own orders. A real deployment issues them where it authenticates people, with ORDERS_AUTH_SECRET.
const auth = createAuth(process.env.ORDERS_AUTH_SECRET ?? randomBytes(32).toString("base64url"));
const operator = await auth.issue({ role: "admin", subject: "demo" });
const app = buildApp(service, { auth });
const base = await app.listen({ port: 0, host: "127.0.0.1" });
say(`orders service on ${base}, ${shards.describe}\n`);

type Body = Record<string, unknown> & { id: string; message?: string; error?: string };
async function call(
  method: string,
  path: string,
  body?: unknown,
  key: string = randomUUID(),
  token: string | null = operator,
) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      "content-type": "application/json",
      "idempotency-key": key,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return {
    status: response.status,
    replayed: response.headers.get("idempotent-replayed") === "true",
    body: (await response.json()) as Body,
  };
}
const shardOf = (id: string) => ShardedUUID.shardOf(id).key;
const money = (minor: unknown) => (Number(minor) / 100).toFixed(2);
const names = new Map<string, string>();

const people = [
  { name: "Ana", region: "DE", tenant: "acme", currency: "EUR", creditLimit: "50000" },
  { name: "Bruno", region: "ES", tenant: "globex", currency: "EUR", creditLimit: "30000" },
  { name: "Carla", region: "MX", tenant: "acme", currency: "MXN", creditLimit: "200000" },
  { name: "Diego", region: "MX", tenant: "initech", currency: "MXN", creditLimit: "100000" },
  { name: "Elena", region: "MX", tenant: "hooli", currency: "MXN", creditLimit: "80000" },
];
const customers: Record<string, string> = {};
say("customers (the region picks the group, the tenant's hash picks the shard):");
for (const person of people) {
  const customer = (await call("POST", "/customers", person)).body;
  customers[person.name] = customer.id;
  names.set(customer.id, person.name);
  say(
    `  ${person.name.padEnd(6)} ${person.region}/${person.tenant.padEnd(8)} -> shard ${shardOf(customer.id)}  credit limit ${money(person.creditLimit)} ${person.currency}`,
  );
}

say("\norders (each one transaction on its customer's shard: credit check, order, items, order.placed):");
const orders: Record<string, string> = {};
const placements = [
  { label: "Ana #1", who: "Ana", items: [{ sku: "KB-01", qty: 2, unitPrice: "4999" }] },
  {
    label: "Ana #2",
    who: "Ana",
    items: [
      { sku: "MS-02", qty: 1, unitPrice: "2500" },
      { sku: "CB-03", qty: 3, unitPrice: "900" },
    ],
  },
  { label: "Bruno #1", who: "Bruno", items: [{ sku: "MN-27", qty: 1, unitPrice: "24900" }] },
  { label: "Carla #1", who: "Carla", items: [{ sku: "LP-14", qty: 1, unitPrice: "149900" }] },
  { label: "Carla #2", who: "Carla", items: [{ sku: "CB-03", qty: 10, unitPrice: "1800" }] },
  { label: "Diego #1", who: "Diego", items: [{ sku: "HD-05", qty: 4, unitPrice: "12000" }] },
  { label: "Elena #1", who: "Elena", items: [{ sku: "TB-08", qty: 2, unitPrice: "15000" }] },
];
for (const p of placements) {
  const person = people.find((x) => x.name === p.who)!;
  const res = await call("POST", `/customers/${customers[p.who]}/orders`, {
    currency: person.currency,
    items: p.items,
  });
  orders[p.label] = res.body.id;
  names.set(res.body.id, p.label);
  say(
    `  ${p.label.padEnd(9)} HTTP ${res.status} ${res.body.status}  order ${res.body.id} (shard ${shardOf(res.body.id)}) ${money(res.body.total)} ${person.currency}, ${(res.body.items as unknown[]).length} item(s)`,
  );
}

say("\nrefusals, a cancel and a retry:");
const big = { currency: "EUR", items: [{ sku: "DK-11", qty: 1, unitPrice: "9000" }] };
const over = await call("POST", `/customers/${customers.Bruno}/orders`, big);
say(`  Bruno orders 90.00 more (limit 300.00, 249.00 open): HTTP ${over.status} ${over.body.error}`);
say(`    ${over.body.message}`);
const cancel = await call("POST", `/orders/${orders["Bruno #1"]}/cancel`, {});
say(`  Bruno cancels his 249.00 order: HTTP ${cancel.status} ${cancel.body.status}`);
const again = await call("POST", `/customers/${customers.Bruno}/orders`, big, "demo-bruno-desk");
orders["Bruno #2"] = again.body.id;
names.set(again.body.id, "Bruno #2");
say(`  Bruno orders the 90.00 again: HTTP ${again.status} ${again.body.status}`);
const retry = await call("POST", `/customers/${customers.Bruno}/orders`, big, "demo-bruno-desk");
say(
  `  the same request again (same Idempotency-Key): HTTP ${retry.status}, replayed: ${retry.replayed}, same order: ${retry.body.id === again.body.id}`,
);
const twice = await call("POST", `/orders/${orders["Bruno #1"]}/cancel`, {});
say(`  Bruno cancels the cancelled order: HTTP ${twice.status} ${twice.body.error}`);
const badQty = await call("POST", `/customers/${customers.Ana}/orders`, {
  currency: "EUR",
  items: [{ sku: "KB-01", qty: 0, unitPrice: "4999" }],
});
say(`  Ana orders 0 keyboards: HTTP ${badQty.status} ${badQty.body.error}: ${badQty.body.message}`);
const wrongCurrency = await call("POST", `/customers/${customers.Diego}/orders`, big);
say(`  Diego orders in EUR: HTTP ${wrongCurrency.status} ${wrongCurrency.body.error}`);
const asAna = await auth.issue({ role: "customer", customerId: customers.Ana! });
const own = await call("GET", `/orders/${orders["Ana #1"]}`, undefined, undefined, asAna);
const others = await call("GET", `/orders/${orders["Bruno #2"]}`, undefined, undefined, asAna);
say(
  `  Ana (her own token) reads her order: HTTP ${own.status}; Bruno's: HTTP ${others.status} ${others.body.error}`,
);
const anonymous = await call("GET", `/orders/${orders["Ana #1"]}`, undefined, undefined, null);
say(`  no credential: HTTP ${anonymous.status} ${anonymous.body.error}`);

say("\nback office: every order, newest first, 3 per page (one query per database, merged):");
let cursor: string | null = null;
let pageNo = 0;
do {
  const res = await call("GET", `/admin/orders?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
  const page = res.body as unknown as {
    orders: { id: string; status: string; total: string; currency: string }[];
    nextCursor: string | null;
    complete: boolean;
  };
  pageNo++;
  say(
    `  page ${pageNo}: ${page.orders.map((o) => `${names.get(o.id)} ${o.status} ${money(o.total)} ${o.currency}`).join(", ")}`,
  );
  cursor = page.nextCursor;
} while (cursor);
const cancelled = (await call("GET", "/admin/orders?status=cancelled")).body as unknown as {
  orders: { id: string }[];
};
say(`  status=cancelled: ${cancelled.orders.map((o) => names.get(o.id)).join(", ")}`);

say(
  "\nback office: totals per day, status and currency (each database groups its rows, the groups are merged):",
);
const totals = (await call("GET", "/admin/totals")).body as unknown as {
  totals: { day: string; status: string; currency: string; count: number; total: string }[];
  complete: boolean;
};
for (const t of totals.totals) {
  say(
    `  ${t.day} ${t.status.padEnd(9)} ${t.currency} ${String(t.count).padStart(2)} order(s) ${money(t.total).padStart(9)}`,
  );
}
say(`  complete: ${totals.complete}`);

say("\noutbox (order.placed / order.cancelled, written in the order's transaction):");
const lagLine = async () => (await relay.lag()).map((l) => `${l.shards}: ${l.pending} pending`).join("; ");
say(`  before the relay: ${await lagLine()}`);
await relay.runOnce();
say(`  the relay delivered ${delivered.length} event(s) to the downstream consumer:`);
const byTopic = new Map<string, number>();
for (const m of delivered) byTopic.set(m.topic, (byTopic.get(m.topic) ?? 0) + 1);
say(`    ${[...byTopic].map(([topic, n]) => `${topic} x${n}`).join(", ")}`);
say(`  after: ${await lagLine()}`);

say("\nwhere every row lives:");
for (const { shard, customers: cs, orders: os } of await service.census()) {
  say(`  shard ${shard}: ${cs.map((c) => c.name).join(", ") || "(no customers)"}`);
  for (const o of os) {
    say(
      `    ${(names.get(o.id) ?? o.id).padEnd(9)} ${o.status.padEnd(9)} ${money(o.total).padStart(9)} ${o.currency}`,
    );
  }
}
say("\ncredit used (open orders) within each limit:");
for (const person of people) {
  const list = (await call("GET", `/customers/${customers[person.name]}/orders?limit=200`))
    .body as unknown as {
    orders: { status: string; total: string }[];
  };
  const open = list.orders.filter((o) => o.status === "placed").reduce((s, o) => s + BigInt(o.total), 0n);
  const ok = open <= BigInt(person.creditLimit) ? "within the limit" : "OVER THE LIMIT";
  say(
    `  ${person.name.padEnd(6)} ${money(open).padStart(9)} of ${money(person.creditLimit).padStart(9)} ${person.currency}: ${ok}`,
  );
}

await app.close();
await shards.close();
