import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { auth, bearer, operator } from "./test/auth.js";
import { walletWorld } from "./test/world.js";

// Hostile input on every route: whatever a caller sends (any path segment, body, query, cursor,
// header), the answer is a 2xx, a 4xx naming the problem, or a 503 naming the shard, never a 500,
// and an error body never carries a stack trace, SQL or a connection string.
let world: Awaited<ReturnType<typeof walletWorld>>;
/** IDs made before the run, and credentials: an operator, the customer of `mine`, another customer. */
const known: Record<string, string> = {};
const credentials: Record<string, string> = {};
beforeAll(async () => {
  world = await walletWorld();
  const mine = await world.customerWithWallet("DE", "hostile", "EUR", "1000");
  const theirs = await world.customerWithWallet("MX", "hostile", "MXN", "1000");
  const transfer = await world.http("POST", "/transfers", {
    fromWalletId: mine.walletId,
    toWalletId: (await world.customerWithWallet("DE", "other", "EUR")).walletId,
    amount: "1",
  });
  const page = await world.http("GET", "/admin/wallets?limit=1");
  Object.assign(known, {
    "my-customer": mine.customerId,
    "my-wallet": mine.walletId,
    "their-customer": theirs.customerId,
    "their-wallet": theirs.walletId,
    "my-transfer": transfer.body.id,
    cursor: page.body.nextCursor,
  });
  Object.assign(credentials, {
    operator,
    mine: await auth.issue({ role: "customer", customerId: mine.customerId }),
    theirs: await auth.issue({ role: "customer", customerId: theirs.customerId }),
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
  fc.constantFrom("my-customer", "my-wallet", "their-customer", "their-wallet", "my-transfer"),
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
const FIELDS = ["name", "region", "tenant", "currency", "amount", "fromWalletId", "toWalletId", "x"];
/** Each route, with a body it takes. */
const ROUTES: Record<string, Record<string, unknown>> = {
  "POST /customers": { name: "n", region: "DE", tenant: "t" },
  "POST /customers/:id/wallets": { currency: "EUR" },
  "POST /wallets/:id/deposits": { amount: "1" },
  "POST /wallets/:id/withdrawals": { amount: "1" },
  "POST /transfers": { fromWalletId: "my-wallet", toWalletId: "their-wallet", amount: "1" },
  "GET /transfers/:id": {},
  "GET /wallets/:id": {},
  "GET /admin/wallets": {},
  "GET /health": {},
};
/** `valid` with one field replaced, removed or added. */
const nearlyValid = (valid: Record<string, unknown>) =>
  fc.tuple(fc.constantFrom(...FIELDS), fc.option(value)).map(([field, replacement]) => {
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
/** A list's cursor: the real one, the real one altered, or made up. */
const cursor = fc.oneof(
  fc.constant("cursor"),
  fc.tuple(fc.nat(200), fc.constantFrom("A", "_", "-", "=", "")).map(([at, c]) => ({ at, c })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
  text,
);
const query = fc.dictionary(
  fc.constantFrom("limit", "cursor", "x"),
  fc.oneof(text, cursor, fc.integer({ min: -5, max: 500 }).map(String)),
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
  // customer's wallet.
  const examples: [[string, unknown], string, Record<string, unknown>, string | null, string | null][] = [
    [["GET /health", {}], "x", {}, null, null],
    [["POST /customers", ROUTES["POST /customers"]!], "x", {}, "operator", "hostile-example-201"],
    [["POST /customers", {}], "x", {}, "operator", null],
    [["GET /admin/wallets", {}], "x", {}, null, null],
    [["GET /admin/wallets", {}], "x", {}, "mine", null],
    [["GET /wallets/:id", {}], escaped(known["their-wallet"]!), {}, "mine", null],
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
