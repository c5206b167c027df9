import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { moveShard } from "@shardkit/ownership";
import { httpClient } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { type Database, embeddedDatabases, openRouter, type Router } from "./shards.js";
import { auth, bearer, operator } from "./test/auth.js";

// The HTTP API on embedded PGlite databases: shards 0/0 and 0/1 in db-a, 1/0 in db-b, db-new a spare.
let databases: Database[];
let router: Router;
let app: ReturnType<typeof buildApp>;
beforeAll(async () => {
  databases = await embeddedDatabases([
    { name: "db-a", shards: [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)] },
    { name: "db-b", shards: [ShardIdentifier.of(1, 0)] },
    { name: "db-new", shards: [] },
  ]);
  router = await openRouter(databases);
  app = buildApp(new AllocationService(router), { auth });
});
afterAll(async () => {
  await app.close();
  await router.close();
  for (const d of databases) await d.pglite.close();
});

/** A POST as `token`'s holder (default: an operator; null: no credential), under a new Idempotency-Key. */
const post = (url: string, body: unknown, key?: string | null, token?: string | null) =>
  httpClient(app, { token: operator })("POST", url, body, key, token);

describe("allocations over HTTP", () => {
  it("a body giving a key twice is a 400 naming the key", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/buckets",
      headers: {
        "idempotency-key": `dup-key-${Date.now()}`,
        "content-type": "application/json",
        ...bearer(operator),
      },
      payload: '{"name":"B-2","capacity":1,"capacity":1000000}',
    });
    expect([res.statusCode, res.json()]).toEqual([
      400,
      {
        error: "VALIDATION",
        message: "capacity: given twice in the body (each key once)",
        issues: ["capacity: given twice in the body (each key once)"],
      },
    ]);
  });

  it("a bucket on a shard this deployment lacks, or no shard at all, is a 400 naming the field and the shards it has", async () => {
    for (const shard of ["9/9", "0/63", "255/63", "256/0", "0/64"]) {
      const response = await post("/buckets", { name: "B-1", capacity: 1, shard });
      expect([response.status, response.body.error, response.body.message], shard).toEqual([
        400,
        "VALIDATION",
        `shard: this deployment has no shard "${shard}"; it has 0/0, 0/1, 1/0`,
      ]);
    }
  });

  it("holds and confirmations on a bucket's shard; the last unit goes once; a retried key gets its recorded answer", async () => {
    const bucket = await post("/buckets", { name: "B-173", capacity: 3, shard: "0/1" });
    expect(bucket.status).toBe(201);
    const id = bucket.body.id as string;
    const hold = await post(`/buckets/${id}/holds`, { units: 2, desk: "one" });
    expect(hold.status).toBe(201);
    const fromHold = await post("/allocations/confirm", {
      bucket_id: id,
      hold_id: hold.body.id,
      desk: "one",
    });
    expect([fromHold.status, fromHold.body.units]).toEqual([201, 2]);
    const again = await post("/allocations/confirm", { bucket_id: id, hold_id: hold.body.id, desk: "one" });
    expect([again.status, again.body.error]).toEqual([409, "HOLD_NOT_ACTIVE"]);
    // Two desks race for the last unit with their own keys: one confirmation, one SOLD_OUT.
    const race = await Promise.all(
      ["one", "two"].map((desk) => post("/allocations/confirm", { bucket_id: id, desk }, `race-${desk}-key`)),
    );
    expect(race.map((r) => r.status).sort()).toEqual([201, 409]);
    const loser = race.find((r) => r.status === 409)!;
    expect(loser.body).toMatchObject({ error: "SOLD_OUT" });
    const winner = race.find((r) => r.status === 201)!;
    const replay = await post(
      "/allocations/confirm",
      { bucket_id: id, desk: winner.body.desk },
      `race-${winner.body.desk}-key`,
    );
    expect([replay.status, replay.body.id, replay.headers["idempotent-replayed"]]).toEqual([
      201,
      winner.body.id,
      "true",
    ]);
    const view = await app.inject({ method: "GET", url: `/buckets/${id}`, headers: bearer(operator) });
    expect(view.json()).toMatchObject({ capacity: 3, held: 0, confirmed: 3, confirmations: 2 });
  });

  it("a confirmation routed by a stale map after the bucket's shard moved is refused by the old owner and decided at the new one", async () => {
    const bucket = await post("/buckets", { name: "moving", capacity: 10, shard: "0/0" });
    const id = bucket.body.id as string;
    const mover = await openRouter(databases);
    try {
      await moveShard({
        map: mover.map,
        shard: "0/0",
        to: mover.database("db-new"),
        mode: "offline",
        onProgress: () => {},
      });
    } finally {
      await mover.close();
    }
    expect(router.registry.databaseOf(id).name).toBe("db-a"); // this service's map has not heard of it
    const confirmed = await post("/allocations/confirm", { bucket_id: id, desk: "one", units: 4 });
    expect(confirmed.status).toBe(201);
    expect(router.registry.databaseOf(id).name).toBe("db-new");
    expect(router.map.counters.staleRejections).toBeGreaterThanOrEqual(1);
    const view = await app.inject({ method: "GET", url: `/buckets/${id}`, headers: bearer(operator) });
    expect(view.json()).toMatchObject({ confirmed: 4 });
  });

  it("bad input is a 400 naming the field, before any query; unknown buckets are 404", async () => {
    for (const [url, body, message] of [
      ["/buckets", { name: "x", capacity: 0 }, /capacity: must be a whole number/],
      ["/buckets", { name: "x\u0000", capacity: 1 }, /name: must not contain NUL/],
      ["/buckets", { name: "x", capacity: 1, extra: true }, /Unrecognized key/],
      ["/allocations/confirm", { bucket_id: "nope", desk: "one" }, /bucket_id: not a valid ID/],
      [
        "/allocations/confirm",
        { bucket_id: ShardedId.generate("Bucket", ShardIdentifier.of(0, 0)), desk: "one", units: 1.5 },
        /units: must be a whole number/,
      ],
    ] as const) {
      const res = await post(url, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    const unknown = await post("/allocations/confirm", {
      bucket_id: ShardedId.generate("Bucket", ShardIdentifier.of(5, 5)),
      desk: "one",
    });
    expect(unknown.status).toBe(404);
    const missing = await post("/allocations/confirm", {
      bucket_id: ShardedId.generate("Bucket", ShardIdentifier.of(1, 0)),
      desk: "one",
    });
    expect([missing.status, missing.body.error]).toEqual([404, "NOT_FOUND"]);
    const emoji = await post("/buckets", { name: "\u{1F39F} B-1", capacity: 1 }); // a surrogate pair is text like any other
    expect([emoji.status, emoji.body.name]).toEqual([201, "\u{1F39F} B-1"]);
    const noKey = await post("/buckets", { name: "x", capacity: 1 }, null);
    expect([noKey.status, noKey.body.error]).toEqual([400, "IDEMPOTENCY_KEY_REQUIRED"]);
  });

  it("every route needs a valid credential; a desk holds and confirms only as itself; buckets are made by operators", async () => {
    const bucket = await post("/buckets", { name: "guarded", capacity: 5, shard: "1/0" });
    const id = bucket.body.id as string;
    const expired = await auth.issue({ role: "admin", subject: "tests" }, "-1m");
    for (const token of [null, "garbage", `${operator.slice(0, -2)}xx`, expired]) {
      for (const [url, body] of [
        ["/buckets", { name: "x", capacity: 1 }],
        [`/buckets/${id}/holds`, { units: 1, desk: "one" }],
        ["/allocations/confirm", { bucket_id: id, desk: "one" }],
      ] as const) {
        const res = await post(url, body, undefined, token);
        expect([url, res.status, res.body.error]).toEqual([url, 401, "UNAUTHENTICATED"]);
        expect(res.headers["www-authenticate"]).toBe('Bearer realm="allocations"');
      }
      const view = await app.inject({
        method: "GET",
        url: `/buckets/${id}`,
        headers: token ? bearer(token) : {},
      });
      expect(view.statusCode).toBe(401);
    }
    const one = await auth.issue({ role: "desk", desk: "one" });
    const mine = await post(`/buckets/${id}/holds`, { units: 2, desk: "one" }, undefined, one);
    expect(mine.status).toBe(201);
    for (const [url, body] of [
      [`/buckets/${id}/holds`, { units: 1, desk: "two" }],
      ["/allocations/confirm", { bucket_id: id, desk: "two" }],
      ["/allocations/confirm", { bucket_id: id, hold_id: mine.body.id, desk: "two" }],
    ] as const) {
      const res = await post(url, body, undefined, one);
      expect([url, res.status, res.body.error]).toEqual([url, 403, "FORBIDDEN"]);
    }
    // Desk two, as itself, cannot confirm desk one's hold: it answers as a hold not held.
    const two = await auth.issue({ role: "desk", desk: "two" });
    const taken = await post(
      "/allocations/confirm",
      { bucket_id: id, hold_id: mine.body.id, desk: "two" },
      undefined,
      two,
    );
    expect([taken.status, taken.body.error]).toEqual([409, "HOLD_NOT_ACTIVE"]);
    const made = await post("/buckets", { name: "x", capacity: 1 }, undefined, one);
    expect([made.status, made.body.error]).toEqual([403, "FORBIDDEN"]);
    const view = await app.inject({ method: "GET", url: `/buckets/${id}`, headers: bearer(one) });
    expect(view.json()).toMatchObject({ capacity: 5, held: 2, confirmed: 0 });
  });
});
