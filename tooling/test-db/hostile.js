// Hostile input for a service's HTTP API, as a property test (fast-check): whatever a caller sends
// (any path segment, body, query, cursor, credential, Idempotency-Key), the answer is a 2xx, a 4xx
// naming the problem, or a 503 naming the shard, never a 500, and an error body never carries a
// stack trace, SQL or a connection string. The service's test gives its routes, its field names,
// the IDs and credentials it made before the run, and what its own input looks like; this file
// gives the rest: the odd strings, values, bodies, cursors and headers every service must survive.
//
// This file and hostile.d.ts are also every create-shardkit template's src/test/hostile.js and
// src/test/hostile.d.ts, copied unchanged when the templates are built: keep them free of anything
// that only exists in this repository.
import assert from "node:assert/strict";
import fc from "fast-check";

/** Each byte of `value` percent-encoded: a path segment or a query value exactly as given. */
export const escaped = (value) =>
  [...Buffer.from(value)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");

/** Values a caller may put in a body field or a query: odd numbers, too large, of the wrong type. */
const VALUES = [0, -1, 1, 1.5, 1_000_001, "1", "10000000000000", "99999999999999999999", 2 ** 53, 1e308];

/**
 * The arbitraries of the run (see `checkHostileInput`).
 * Longer than 80 lines: every part of a request, each drawn from the service's options and the
 * hostile values of all services, read top to bottom.
 */
function inputs(options) {
  const { routes, fields, known, credentials, shardedId } = options;
  const real = (value) => (typeof value === "string" && value in known ? known[value] : value);
  /** Strings a caller may put anywhere: odd, long, not Unicode, IDs of shards there are not, real IDs. */
  const text = fc.oneof(
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.constantFrom("", " ", "0", "-1", "1e309", "NaN", "null", "__proto__", "constructor", "0/0", "9/9"),
    fc.constantFrom("\u0000", "\ud800", "x".repeat(5000), "00000000-0000-0000-0000-000000000000"),
    fc.uuid({ version: [4, 7] }),
    fc.integer({ min: 0, max: 16383 }).map(shardedId),
    fc.constantFrom(...Object.keys(known)),
    ...(options.texts?.length ? [fc.constantFrom(...options.texts)] : []),
  );
  /** Path segments as sent: each byte of the text percent-encoded, or malformed escapes as they are. */
  const segment = fc.oneof(
    text.map((value) => escaped(String(real(value)))),
    fc.constantFrom("%", "%FF", "%C0%AF", "%E0%A4%A", "%00", ".."),
  );
  const value = fc.oneof(text, fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(...VALUES, true, null, [], {}));
  // A list of records over `itemFields` (an order's items) where a body takes one.
  const item = fc.dictionary(fc.constantFrom(...(options.itemFields ?? ["x"])), value, { maxKeys: 4 });
  const replacement = options.itemFields ? fc.oneof(value, fc.array(item, { maxLength: 3 })) : value;
  /** `valid` with one field replaced, removed or added. */
  const nearlyValid = (valid) =>
    fc.tuple(fc.constantFrom(...fields, "x"), fc.option(replacement)).map(([field, v]) => {
      const out = { ...valid };
      if (v === null) delete out[field];
      else out[field] = v;
      return out;
    });
  /** A body: valid, nearly valid, a record over the API's field names, any JSON, or not JSON at all. */
  const bodyFor = (valid) =>
    fc.oneof(
      { arbitrary: fc.constant(valid), weight: 2 },
      { arbitrary: nearlyValid(valid), weight: 3 },
      fc.dictionary(fc.constantFrom(...fields, "x", "__proto__"), value, { maxKeys: 5 }),
      fc.jsonValue({ maxDepth: 3 }),
      fc.string({ maxLength: 30 }).map((raw) => ({ raw })),
    );
  /** A list's cursor: a real one, the first real one altered, or made up. */
  const cursors = options.query?.cursors ?? [];
  const cursor = fc.oneof(
    ...(cursors.length ? [fc.constantFrom(...cursors)] : []),
    fc.tuple(fc.nat(200), fc.constantFrom("A", "_", "-", "=", "")).map(([at, c]) => ({ at, c })),
    fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
    text,
  );
  const query = options.query
    ? fc.dictionary(
        fc.constantFrom(...options.query.names, "x"),
        fc.oneof(
          text,
          cursor,
          fc.integer({ min: -5, max: 500 }).map(String),
          ...(options.query.values?.length ? [fc.constantFrom(...options.query.values)] : []),
        ),
        { maxKeys: 3 },
      )
    : fc.constant({});
  const credential = fc.oneof(
    { arbitrary: fc.constantFrom(...Object.keys(credentials)), weight: 4 },
    fc.constant(null),
    fc.string({ maxLength: 40 }),
    fc.string({ maxLength: 40 }).map((t) => `Bearer ${t}`),
  );
  const key = fc.oneof({ arbitrary: fc.uuid(), weight: 4 }, fc.constant(null), fc.string({ maxLength: 140 }));
  /** A route and its body. */
  const request = fc
    .constantFrom(...Object.keys(routes))
    .chain((route) => fc.tuple(fc.constant(route), bodyFor(routes[route])));
  /** The query string of `q`, stand-ins replaced; a cursor `{ at, c }` is the first real one with a character changed. */
  const search = (q) => {
    const parts = Object.entries(q).map(([name, v]) => {
      let text;
      if (v !== null && typeof v === "object" && "at" in v) {
        const first = known[cursors[0]] ?? "";
        const at = v.at % (first.length + 1);
        text = first.slice(0, at) + v.c + first.slice(at + 1);
      } else text = String(real(v));
      return `${name}=${escaped(text)}`;
    });
    return parts.length ? `?${parts.join("&")}` : "";
  };
  return { real, request, segment, query, credential, key, search };
}

/**
 * Sends `numRuns` (default 1,000) hostile requests to `app` (Fastify's `inject`) and checks every
 * answer (see the file's comment). Examples run first, so what the run reaches never depends on the
 * draw: every route with its valid body as the first of `credentials` (an operator) and without a
 * credential, the first POST route with an empty body, then the service's own `examples` (what
 * needs its knowledge: a route a credential may not use, another caller's data). Resolves to the
 * statuses seen, for the test to check that every layer was reached.
 */
export async function checkHostileInput(app, options) {
  const { routes, credentials, numRuns = 1000 } = options;
  const { real, request, segment, query, credential, key, search } = inputs(options);
  const seen = new Set();
  const names = Object.keys(routes);
  const operator = Object.keys(credentials)[0];
  const firstPost = names.filter((route) => route.startsWith("POST ")).slice(0, 1);
  const examples = [
    ...names.map((route) => ({ route, credential: operator })),
    ...names.map((route) => ({ route })),
    ...firstPost.map((route) => ({ route, body: {}, credential: operator })),
    ...(options.examples ?? []),
  ].map((e, i) => [
    [e.route, e.body ?? routes[e.route]],
    e.id === undefined ? "x" : escaped(String(real(e.id))),
    e.query ?? {},
    e.credential ?? null,
    e.key === undefined ? `hostile-example-${i}` : e.key,
  ]);
  await fc.assert(
    fc.asyncProperty(request, segment, query, credential, key, async ([route, payload], seg, q, cred, k) => {
      const [method, path] = route.split(" ");
      const url = path.replace(":id", seg) + (method === "GET" ? search(q) : "");
      const authorization = cred !== null && cred in credentials ? `Bearer ${credentials[cred]}` : cred;
      const headers = {};
      if (authorization !== null) headers.authorization = authorization;
      if (k !== null) headers["idempotency-key"] = k;
      if (method === "POST") headers["content-type"] = "application/json";
      const raw = payload !== null && typeof payload === "object" && "raw" in payload;
      const body = raw ? String(payload.raw) : JSON.stringify(payload, (_k, v) => real(v));
      const res = await app.inject({ method, url, headers, ...(method === "POST" ? { payload: body } : {}) });
      seen.add(res.statusCode);
      const answer = `${method} ${url} ${JSON.stringify(payload)} -> ${res.statusCode} ${res.body}`;
      // Only /health answers a report (`status`) instead of an error.
      const report = path === "/health" ? res.json().status : undefined;
      if (res.statusCode === 503) assert.ok(res.json().shard ?? res.json().missing ?? report, answer);
      else assert.ok(res.statusCode < 500, answer);
      if (res.statusCode >= 400) {
        assert.equal(typeof (res.json().error ?? report), "string", answer);
        assert.doesNotMatch(res.body, /\n\s+at |postgres(ql)?:\/\/|\b(SELECT|INSERT|UPDATE)\b/, answer);
      }
    }),
    { numRuns, examples },
  );
  return seen;
}
