import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { auth, bearer, operator } from "./test/auth.js";
import { ordersWorld } from "./test/world.js";

// Hostile input on every route: whatever a caller sends (any path segment, body, query, cursor,
// header), the answer is a 2xx, a 4xx naming the problem, or a 503 naming the shard, never a 500,
// and an error body never carries a stack trace, SQL or a connection string.
let world: Awaited<ReturnType<typeof ordersWorld>>;
/** IDs made before the run, and credentials: an operator, the customer of `mine`, another customer. */
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

/** The stand-ins for the IDs made before the run, replaced by them. */
const real = (value: unknown) => (typeof value === "string" && value in known ? known[value] : value);
/** Strings a caller may put anywhere: odd, long, not Unicode, IDs of shards there are not, real IDs. */
const text = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom("", " ", "0", "-1", "1e309", "NaN", "null", "__proto__", "constructor", "0/0"),
  fc.constantFrom("\u0000", "\ud800", "x".repeat(5000), "00000000-0000-0000-0000-000000000000"),
  fc.uuid({ version: [4, 7] }),
  fc.integer({ min: 0, max: 16383 }).map((bits) => ShardedUUID.generate(ShardIdentifier.fromBits(bits))),
  fc.constantFrom("my-customer", "their-customer", "my-order"),
  fc.constantFrom(
    "2024-01-01",
    "2024-02-30",
    "0000-01-01T00:00Z",
    "9999-12-31T23:59:59.999Z",
    "2024-01-01T00:00+25:00",
  ),
);
const escaped = (value: string) =>
  [...Buffer.from(value)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
/** Path segments as sent: each byte of the text percent-encoded, or malformed escapes as they are. */
const segment = fc.oneof(
  text.map((value) => escaped(String(real(value)))),
  fc.constantFrom("%", "%FF", "%C0%AF", "%E0%A4%A", "%00", ".."),
);
const value: fc.Arbitrary<unknown> = fc.oneof(
  text,
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(
    0,
    -1,
    1,
    1.5,
    "1",
    "10000000000000",
    "99999999999999999999",
    2 ** 53,
    1e308,
    true,
    null,
    [],
    {},
  ),
);
const FIELDS = ["name", "region", "tenant", "currency", "creditLimit", "items", "x"];
const item = fc.dictionary(fc.constantFrom("sku", "qty", "unitPrice", "x"), value, { maxKeys: 4 });
/** Each route, with a body it takes. */
const ROUTES: Record<string, Record<string, unknown>> = {
  "GET /health": {},
  "POST /customers": { name: "n", region: "DE", tenant: "t", currency: "EUR", creditLimit: "1000" },
  "GET /customers/:id": {},
  "POST /customers/:id/orders": { currency: "EUR", items: [{ sku: "A-1", qty: 1, unitPrice: "5" }] },
  "GET /customers/:id/orders": {},
  "POST /orders/:id/cancel": {},
  "GET /orders/:id": {},
  "GET /admin/orders": {},
  "GET /admin/totals": {},
};
/** `valid` with one field replaced, removed or added. */
const nearlyValid = (valid: Record<string, unknown>) =>
  fc
    .tuple(fc.constantFrom(...FIELDS), fc.option(fc.oneof(value, fc.array(item, { maxLength: 3 }))))
    .map(([field, replacement]) => {
      const out: Record<string, unknown> = { ...valid };
      if (replacement === null) delete out[field];
      else out[field] = replacement;
      return out;
    });
/** A body: valid, nearly valid, a record over the API's field names, any JSON, or not JSON at all. */
const bodyFor = (valid: Record<string, unknown>) =>
  fc.oneof(
    { arbitrary: fc.constant(valid), weight: 2 },
    { arbitrary: nearlyValid(valid), weight: 3 },
    fc.dictionary(fc.constantFrom(...FIELDS, "__proto__"), value, { maxKeys: 5 }),
    fc.jsonValue({ maxDepth: 3 }),
    fc.string({ maxLength: 30 }).map((raw) => ({ raw })),
  );
/** A list's cursor: a real one, a real one altered, or made up. */
const cursor = fc.oneof(
  fc.constantFrom("cursor", "admin-cursor"),
  fc.tuple(fc.nat(200), fc.constantFrom("A", "_", "-", "=", "")).map(([at, c]) => ({ at, c })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
  text,
);
const query = fc.dictionary(
  fc.constantFrom("limit", "cursor", "status", "from", "to", "partial", "x"),
  fc.oneof(text, cursor, fc.integer({ min: -5, max: 500 }).map(String), fc.constantFrom("placed", "true")),
  { maxKeys: 3 },
);
const credential = fc.oneof(
  { arbitrary: fc.constantFrom("operator", "mine", "theirs"), weight: 4 },
  fc.constant<string | null>(null),
  fc.string({ maxLength: 40 }),
  fc.string({ maxLength: 40 }).map((t) => `Bearer ${t}`),
);
const key = fc.oneof(
  { arbitrary: fc.uuid(), weight: 4 },
  fc.constant<string | null>(null),
  fc.string({ maxLength: 140 }),
);
/** A route and its body. */
const request = fc
  .constantFrom(...Object.keys(ROUTES))
  .chain((route) => fc.tuple(fc.constant(route), bodyFor(ROUTES[route]!)));

/** The query string of `query`, stand-ins replaced; a cursor `{ at, c }` is the real one with a character changed. */
function search(query: Record<string, unknown>): string {
  const parts = Object.entries(query).map(([name, v]) => {
    let text: string;
    if (v !== null && typeof v === "object" && "at" in v) {
      const { at, c } = v as { at: number; c: string };
      const real = known.cursor ?? "";
      text = real.slice(0, at % (real.length + 1)) + c + real.slice((at % (real.length + 1)) + 1);
    } else text = String(real(v));
    return `${name}=${escaped(text)}`;
  });
  return parts.length ? `?${parts.join("&")}` : "";
}

it("no input answers 500, and no error body carries internals", { timeout: 600_000 }, async () => {
  const seen = new Set<number>();
  // One request per layer runs first, so what the run reaches never depends on the draw: an open
  // route, a valid write, a bad body, no credential, a customer on an operator's route, another
  // customer.
  const examples: [[string, unknown], string, Record<string, unknown>, string | null, string | null][] = [
    [["GET /health", {}], "x", {}, null, null],
    [["POST /customers", ROUTES["POST /customers"]!], "x", {}, "operator", "hostile-example-201"],
    [["POST /customers", {}], "x", {}, "operator", null],
    [["GET /admin/orders", {}], "x", {}, null, null],
    [["GET /admin/orders", {}], "x", {}, "mine", null],
    [["GET /customers/:id", {}], escaped(known["their-customer"]!), {}, "mine", null],
  ];
  await fc.assert(
    fc.asyncProperty(
      request,
      segment,
      query,
      credential,
      key,
      async ([route, payload], segment, query, credential, key) => {
        const [method, path] = route.split(" ") as ["GET" | "POST", string];
        const url = path.replace(":id", segment) + (method === "GET" ? search(query) : "");
        const authorization =
          credential !== null && credential in credentials
            ? bearer(credentials[credential]!).authorization
            : credential;
        const headers: Record<string, string> = {};
        if (authorization !== null) headers.authorization = authorization;
        if (key !== null) headers["idempotency-key"] = key;
        const raw = payload !== null && typeof payload === "object" && "raw" in payload;
        if (method === "POST") headers["content-type"] = "application/json";
        const res = await world.app.inject({
          method,
          url,
          headers,
          ...(method === "POST"
            ? {
                payload: raw
                  ? String((payload as { raw: string }).raw)
                  : JSON.stringify(payload, (_k, v) => real(v)),
              }
            : {}),
        });
        seen.add(res.statusCode);
        const answer = `${method} ${url} ${JSON.stringify(payload)} -> ${res.statusCode} ${res.body}`;
        expect(
          res.statusCode === 503
            ? (res.json().shard ?? res.json().missing ?? res.json().status)
            : res.statusCode < 500,
          answer,
        ).toBeTruthy();
        if (res.statusCode >= 400) {
          expect(typeof (res.json().error ?? res.json().status), answer).toBe("string");
          expect(res.body, answer).not.toMatch(/\n\s+at |postgres(ql)?:\/\/|\b(SELECT|INSERT|UPDATE)\b/);
        }
      },
    ),
    { numRuns: 1000, examples },
  );
  // The inputs reached every layer: the service's answers as well as the refusals before it.
  expect([...seen].sort()).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404]));
});
