import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { checkHostileInput } from "@shardkit/test-db/hostile";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { type Database, embeddedDatabases, openRouter, type Router } from "./shards.js";
import { auth, bearer, operator } from "./test/auth.js";

// Hostile input on every route (checkHostileInput): whatever a caller sends (any path segment,
// body, header), the answer is a 2xx, a 4xx naming the problem, or a 503 naming the shard, never a
// 500, and an error body never carries a stack trace, SQL or a connection string.
let databases: Database[];
let router: Router;
let app: ReturnType<typeof buildApp>;
/** The bucket and hold made before the run, and credentials: an operator and desk "one". */
const known: Record<string, string> = {};
const credentials: Record<string, string> = { operator };
beforeAll(async () => {
  databases = await embeddedDatabases([
    { name: "db-a", shards: [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)] },
    { name: "db-b", shards: [ShardIdentifier.of(1, 0)] },
  ]);
  router = await openRouter(databases);
  app = buildApp(new AllocationService(router), { auth });
  credentials.desk = await auth.issue({ role: "desk", desk: "one" });
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
    headers: { "idempotency-key": "hostile-hold", ...bearer(credentials.desk) },
  });
  Object.assign(known, { "known-bucket": bucket.json().id, "known-hold": hold.json().id });
});
afterAll(async () => {
  await app.close();
  await router.close();
  for (const d of databases) await d.pglite.close();
});

it("no input answers 500, and no error body carries internals", { timeout: 600_000 }, async () => {
  const seen = await checkHostileInput(app, {
    routes: {
      "POST /buckets": { name: "b", capacity: 5, shard: "0/0" },
      "POST /buckets/:id/holds": { units: 1, desk: "one" },
      "POST /allocations/confirm": { bucket_id: "known-bucket", desk: "one", hold_id: "known-hold" },
      "GET /buckets/:id": {},
    },
    fields: ["name", "capacity", "shard", "units", "desk", "bucket_id", "hold_id"],
    known,
    credentials,
    shardedId: (bits) => ShardedUUID.generate(ShardIdentifier.fromBits(bits)),
    // Beside each route as an operator and without a credential: a read, a desk on an operator's
    // route, a bucket there is not.
    examples: [
      { route: "GET /buckets/:id", id: "known-bucket", credential: "desk" },
      { route: "POST /buckets", credential: "desk" },
      { route: "GET /buckets/:id", id: ShardedUUID.generate(ShardIdentifier.of(0, 0)), credential: "desk" },
    ],
  });
  // The inputs reached every layer: the service's answers as well as the refusals before it.
  expect([...seen].sort()).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404]));
});
