import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { type Database, embeddedDatabases, openRouter, type Router } from "./shards.js";
import { auth, bearer, operator } from "./test/auth.js";

// Hostile input on every route: whatever a caller sends (any path segment, body, header), the
// answer is a 2xx, a 4xx naming the problem, or a 503 naming the shard, never a 500, and an error
// body never carries a stack trace, SQL or a connection string.
let databases: Database[];
let router: Router;
let app: ReturnType<typeof buildApp>;
let known: { bucket: string; hold: string };
let desk: string;
beforeAll(async () => {
  databases = await embeddedDatabases([
    { name: "db-a", shards: [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)] },
    { name: "db-b", shards: [ShardIdentifier.of(1, 0)] },
  ]);
  router = await openRouter(databases);
  app = buildApp(new AllocationService(router), { auth });
  desk = await auth.issue({ role: "desk", desk: "one" });
  const bucket = await app.inject({
    method: "POST",
    url: "/buckets",
    payload: { name: "hostile", capacity: 1000, shard: "0/1" },
    headers: { "idempotency-key": "hostile-bucket", ...bearer(operator) },
  });
  const hold = await app.inject({
    method: "POST",
    url: `/buckets/${bucket.json().id}/holds`,
    payload: { units: 1, desk: "one" },
    headers: { "idempotency-key": "hostile-hold", ...bearer(desk) },
  });
  known = { bucket: bucket.json().id, hold: hold.json().id };
});
afterAll(async () => {
  await app.close();
  await router.close();
  for (const d of databases) await d.pglite.close();
});

/** Strings a caller may put anywhere: odd, long, not Unicode, IDs of shards there are not. */
const text = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom("", " ", "0", "-1", "1e309", "NaN", "null", "__proto__", "constructor", "0/0", "9/9"),
  fc.constantFrom("\u0000", "\ud800", "x".repeat(5000), "00000000-0000-0000-0000-000000000000"),
  fc.uuid({ version: [4, 7] }),
  fc.integer({ min: 0, max: 16383 }).map((bits) => ShardedUUID.generate(ShardIdentifier.fromBits(bits))),
  fc.constantFrom("known-bucket", "known-hold"),
);
/** The stand-ins for the IDs of the bucket and hold made before the run, replaced by them. */
const real = (value: unknown) =>
  value === "known-bucket" ? known.bucket : value === "known-hold" ? known.hold : value;
/** Path segments as sent: each byte of the text percent-encoded, or malformed escapes as they are. */
const segment = fc.oneof(
  text.map((value) => {
    return [...Buffer.from(String(real(value)))].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
  }),
  fc.constantFrom("%", "%FF", "%C0%AF", "%E0%A4%A", "%00", ".."),
);
const value: fc.Arbitrary<unknown> = fc.oneof(
  text,
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(0, -1, 1, 1.5, 1_000_001, 2 ** 53, 1e308, true, null, [], {}),
);
/** Each route, with a body it takes. */
const ROUTES: Record<string, Record<string, unknown>> = {
  "POST /buckets": { name: "b", capacity: 5, shard: "0/0" },
  "POST /buckets/:id/holds": { units: 1, desk: "one" },
  "POST /allocations/confirm": { bucket_id: "known-bucket", desk: "one", hold_id: "known-hold" },
  "GET /buckets/:id": {},
};
/** `valid` with one field replaced, removed or added. */
const nearlyValid = (valid: Record<string, unknown>) =>
  fc
    .tuple(
      fc.constantFrom("name", "capacity", "shard", "units", "desk", "bucket_id", "hold_id", "x"),
      fc.option(value),
    )
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
    fc.dictionary(
      fc.constantFrom("name", "capacity", "shard", "units", "desk", "bucket_id", "hold_id", "__proto__", "x"),
      value,
      { maxKeys: 5 },
    ),
    fc.jsonValue({ maxDepth: 3 }),
    fc.string({ maxLength: 30 }).map((raw) => ({ raw })),
  );
const credential = fc.oneof(
  { arbitrary: fc.constantFrom("operator", "desk"), weight: 4 },
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

it("no input answers 500, and no error body carries internals", { timeout: 600_000 }, async () => {
  const seen = new Set<number>();
  // One request per layer runs first, so what the run reaches never depends on the draw: a read,
  // a valid write, a bad body, no credential, a desk on an operator's route, a bucket there is not.
  const segmentOf = (id: string) =>
    [...Buffer.from(id)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
  const absent = ShardedUUID.generate(ShardIdentifier.of(0, 0));
  const examples: [[string, unknown], string, string | null, string | null][] = [
    [["GET /buckets/:id", {}], segmentOf(known.bucket), "desk", null],
    [["POST /buckets", ROUTES["POST /buckets"]!], "x", "operator", "hostile-example-201"],
    [["POST /buckets", {}], "x", "operator", "hostile-example-400"],
    [["GET /buckets/:id", {}], segmentOf(known.bucket), null, null],
    [["POST /buckets", ROUTES["POST /buckets"]!], "x", "desk", "hostile-example-403"],
    [["GET /buckets/:id", {}], segmentOf(absent), "desk", null],
  ];
  await fc.assert(
    fc.asyncProperty(
      request,
      segment,
      credential,
      key,
      async ([route, payload], segment, credential, key) => {
        const [method, path] = route.split(" ") as ["GET" | "POST", string];
        const url = path.replace(":id", segment);
        const authorization =
          credential === "operator"
            ? bearer(operator).authorization
            : credential === "desk"
              ? bearer(desk).authorization
              : credential;
        const headers: Record<string, string> = {};
        if (authorization !== null) headers.authorization = authorization;
        if (key !== null) headers["idempotency-key"] = key;
        const raw = payload !== null && typeof payload === "object" && "raw" in payload;
        if (method === "POST") headers["content-type"] = "application/json";
        const res = await app.inject({
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
          res.statusCode === 503 ? (res.json().shard ?? res.json().missing) : res.statusCode < 500,
          answer,
        ).toBeTruthy();
        if (res.statusCode >= 400) {
          expect(typeof res.json().error, answer).toBe("string");
          expect(res.body, answer).not.toMatch(/\n\s+at |postgres(ql)?:\/\/|\b(SELECT|INSERT|UPDATE)\b/);
        }
      },
    ),
    { numRuns: 1000, examples },
  );
  // The inputs reached every layer: the service's answers as well as the refusals before it.
  expect([...seen].sort()).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404]));
});
