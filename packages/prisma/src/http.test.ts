import { InvalidShardedIdError, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import fc from "fast-check";
import Fastify from "fastify";
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import {
  CommandUnavailableError,
  IdempotencyConflictError,
  ShardTimeoutError,
  UnknownShardError,
} from "./errors.js";
import {
  httpAnswerOf,
  idempotencyKeyOf,
  parseInput,
  replyOutcome,
  ServiceError,
  serviceErrors,
  shardkitHttp,
  shardOfId,
} from "./fastify.js";
import { createShardRegistry } from "./registry.js";

const s11 = ShardIdentifier.of(1, 1);

class ShopError extends serviceErrors({ VALIDATION: 400, UNAUTHENTICATED: 401, SOLD_OUT: 409, BUSY: 503 }) {}

describe("httpAnswerOf", () => {
  it("a service's own error: its status, code, message and body; 401 names the realm, 503 asks for a retry later", () => {
    expect(httpAnswerOf(new ShopError("SOLD_OUT", "bucket b-1 is sold out", { bucket: "b-1" }))).toEqual({
      status: 409,
      headers: {},
      body: { bucket: "b-1", error: "SOLD_OUT", message: "bucket b-1 is sold out" },
    });
    expect(
      httpAnswerOf(new ShopError("UNAUTHENTICATED", "no credential"), { realm: "shop" })?.headers,
    ).toEqual({
      "www-authenticate": 'Bearer realm="shop"',
    });
    expect(httpAnswerOf(new ShopError("BUSY", "later"))?.headers).toEqual({ "retry-after": "1" });
    // A field of the body never overrides the code or the message.
    const spoofed = new ShopError("SOLD_OUT", "sold out", { error: "OK", message: "fine" });
    expect(httpAnswerOf(spoofed)?.body).toMatchObject({ error: "SOLD_OUT", message: "sold out" });
  });

  it("a service error of another copy of the package (a duplicate install) is recognised by its shape", () => {
    const copy = new ServiceError("GONE", 410, "gone");
    Object.setPrototypeOf(copy, Error.prototype); // no longer instanceof this copy's class
    expect(httpAnswerOf(copy)?.status).toBe(410);
  });

  it("a command whose shard did not answer: 503 naming the shard, saying when it may have been applied", () => {
    const late = new CommandUnavailableError(s11, "unknown", new ShardTimeoutError(s11, 3000));
    expect(httpAnswerOf(late)).toEqual({
      status: 503,
      headers: { "retry-after": "1" },
      body: {
        error: "SHARD_UNAVAILABLE",
        shard: "1/1",
        outcome: "unknown",
        message:
          "shard 1/1 did not answer within 3000 ms: the outcome is unknown (the command may have been applied); retry with the same Idempotency-Key, which returns the outcome once the shard answers",
      },
    });
    const down = new CommandUnavailableError(s11, "not-applied", new Error("connection refused"));
    expect(httpAnswerOf(down)?.body).toEqual({
      error: "SHARD_UNAVAILABLE",
      shard: "1/1",
      message: "shard 1/1 is unavailable or busy; retry later",
    });
  });

  it("a read past its deadline names its shard; a database error that names none still is a 503", () => {
    expect(httpAnswerOf(new ShardTimeoutError(s11, 500))?.body).toEqual({
      error: "SHARD_UNAVAILABLE",
      shard: "1/1",
      message: "shard 1/1 did not answer within 500 ms; retry later",
    });
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5999"), { code: "ECONNREFUSED" });
    expect(httpAnswerOf(refused)).toEqual({
      status: 503,
      headers: { "retry-after": "1" },
      body: { error: "SHARD_UNAVAILABLE", message: "a shard is unavailable or busy; retry later" },
    });
    const deadlock = Object.assign(new Error("deadlock detected"), { code: "40P01" });
    expect(httpAnswerOf(deadlock)?.status).toBe(503);
  });

  it("a reused idempotency key is 409; a malformed ID 400; an ID of a shard this deployment lacks 404", () => {
    expect(httpAnswerOf(new IdempotencyConflictError("k-1"))).toMatchObject({
      status: 409,
      body: { error: "IDEMPOTENCY_CONFLICT" },
    });
    expect(httpAnswerOf(new InvalidShardedIdError("nope", "not a UUID"))).toMatchObject({
      status: 400,
      body: { error: "VALIDATION" },
    });
    expect(httpAnswerOf(new UnknownShardError(ShardIdentifier.of(9, 9), [s11]))).toMatchObject({
      status: 404,
      body: { error: "NOT_FOUND" },
    });
  });

  it("anything else is no refusal (a 500 for the caller to log): plain errors, 5xx status codes, values that are not errors", () => {
    fc.assert(
      fc.property(fc.anything(), (value) => {
        const answer = httpAnswerOf(value);
        // Whatever it is, an answer is never a 2xx/3xx and never a 500 that hides a bug as a refusal.
        if (answer) expect(answer.status >= 400 && answer.status < 600 && answer.status !== 500).toBe(true);
      }),
    );
    expect(httpAnswerOf(new Error("bug"))).toBeUndefined();
    expect(httpAnswerOf(Object.assign(new Error("x"), { statusCode: 500 }))).toBeUndefined();
    expect(httpAnswerOf(null)).toBeUndefined();
    expect(httpAnswerOf("a string")).toBeUndefined();
  });
});

describe("serviceErrors: the refusals a command records", () => {
  class OtherError extends serviceErrors({ SOLD_OUT: 409 }) {}

  it("refusalOf records an error of the class with a 4xx status, as plain data; anything else is no refusal", () => {
    const { refusalOf } = ShopError; // passed as it is: `$command(shard, { refusal: ShopError.refusalOf }, ...)`
    expect(refusalOf(new ShopError("SOLD_OUT", "bucket b-1 is sold out", { bucket: "b-1" }))).toEqual({
      code: "SOLD_OUT",
      message: "bucket b-1 is sold out",
      body: { bucket: "b-1" },
    });
    expect(refusalOf(new ShopError("BUSY", "later"))).toBeUndefined(); // 5xx: rolled back, a retry runs again
    expect(refusalOf(new OtherError("SOLD_OUT", "another service's"))).toBeUndefined();
    expect(refusalOf(new Error("bug"))).toBeUndefined();
    expect(refusalOf(undefined)).toBeUndefined();
  });

  it("fromRefusal gives the recorded refusal back as the service's error, with its status and answer", () => {
    const recorded = JSON.parse(
      JSON.stringify(ShopError.refusalOf(new ShopError("SOLD_OUT", "sold out", { bucket: "b-1" }))),
    );
    const again = ShopError.fromRefusal(recorded);
    expectTypeOf(again).toEqualTypeOf<ShopError>();
    expectTypeOf(ShopError.refusalOf).returns.toEqualTypeOf<
      | {
          code: "VALIDATION" | "UNAUTHENTICATED" | "SOLD_OUT" | "BUSY";
          message: string;
          body: Record<string, unknown>;
        }
      | undefined
    >();
    expect(again).toBeInstanceOf(ShopError);
    expect([again.code, again.status, again.message, again.body]).toEqual([
      "SOLD_OUT",
      409,
      "sold out",
      { bucket: "b-1" },
    ]);
    expect(httpAnswerOf(again)?.body).toEqual({ bucket: "b-1", error: "SOLD_OUT", message: "sold out" });
  });
});

describe("shardOfId", () => {
  const registry = createShardRegistry({
    shards: [{ shard: s11, client: { $disconnect: async () => {} } }],
  });
  class ShopNotFound extends serviceErrors({ VALIDATION: 400, NOT_FOUND: 404, SOLD_OUT: 409 }) {}

  it("the shard an ID names; a malformed ID is VALIDATION, one of a shard the deployment lacks NOT_FOUND, as the service's errors", () => {
    const id = ShardedUUID.generate(s11);
    expect(shardOfId(registry, id, "bucket", ShopNotFound)).toBe(s11);
    // @ts-expect-error: a class without a NOT_FOUND code cannot refuse the ID of a shard there is not
    shardOfId(registry, id, "bucket", ShopError);
    const refused = (value: string) => {
      try {
        shardOfId(registry, value, "bucket", ShopNotFound);
      } catch (error) {
        expect(error).toBeInstanceOf(ShopNotFound);
        return [(error as ShopNotFound).code, (error as ShopNotFound).message];
      }
      throw new Error("expected a refusal");
    };
    expect(refused("not-an-id")).toEqual(["VALIDATION", "bucket: not a valid ID"]);
    expect(refused("1/1")).toEqual(["VALIDATION", "bucket: not a valid ID"]); // a shard's key is no ID
    const elsewhere = ShardedUUID.generate(ShardIdentifier.of(0, 0));
    expect(refused(elsewhere)).toEqual(["NOT_FOUND", `bucket ${elsewhere} not found`]);
  });
});

describe("parseInput", () => {
  const schema = z.strictObject({ name: z.string().min(1), n: z.number().int() });

  it("returns what the schema parsed, or a 400 listing at most ten problems of at most 200 characters", () => {
    expect(parseInput(schema, { name: "a", n: 1 })).toEqual({ name: "a", n: 1 });
    let thrown: unknown;
    try {
      parseInput(
        z.array(z.string().max(1, { error: "x".repeat(400) })),
        Array.from({ length: 25 }, () => "ab"),
      );
    } catch (error) {
      thrown = error;
    }
    const answer = httpAnswerOf(thrown)!;
    expect(answer.status).toBe(400);
    const issues = answer.body.issues as string[];
    expect(issues).toHaveLength(11);
    expect(issues.at(-1)).toBe("and 15 more");
    for (const issue of issues) expect(issue.length).toBeLessThanOrEqual(200);
  });
});

describe("idempotencyKeyOf", () => {
  it("puts a valid key in its caller's namespace, and refuses a missing or malformed one with 400", () => {
    expect(idempotencyKeyOf({ headers: { "idempotency-key": "order-2026:1" } }, "customer:c-1")).toBe(
      "customer:c-1/order-2026:1",
    );
    for (const headers of [
      {},
      { "idempotency-key": "short" },
      { "idempotency-key": "x".repeat(129) },
      { "idempotency-key": ["a-long-key", "b-long-key"] },
      { "idempotency-key": "has space in" },
    ]) {
      let thrown: unknown;
      try {
        idempotencyKeyOf({ headers }, "customer:c-1");
      } catch (error) {
        thrown = error;
      }
      expect(httpAnswerOf(thrown)).toMatchObject({
        status: 400,
        body: { error: "IDEMPOTENCY_KEY_REQUIRED" },
      });
    }
  });
});

describe("shardkitHttp (a real Fastify app)", () => {
  function app() {
    const server = Fastify();
    shardkitHttp(server, { realm: "shop" });
    server.post("/echo", async (req) => req.body);
    server.get<{ Params: { id: string } }>("/items/:id", async () => {
      throw new CommandUnavailableError(s11, "unknown", new ShardTimeoutError(s11, 50));
    });
    server.get("/bug", async () => {
      throw new Error("secret detail of a bug");
    });
    server.get<{ Querystring: { replayed?: string } }>("/outcome", async (req, reply) =>
      replyOutcome(reply, 201, { result: { id: "o-1" }, replayed: req.query.replayed === "1" }),
    );
    server.get("/who", async () => {
      throw new ShopError("UNAUTHENTICATED", "this route needs a credential");
    });
    return server;
  }

  it("answers each error as JSON with its status and headers, and hides a bug's message", async () => {
    const server = app();
    const down = await server.inject({ method: "GET", url: "/items/x" });
    expect([down.statusCode, down.headers["retry-after"], down.json().shard]).toEqual([503, "1", "1/1"]);
    const bug = await server.inject({ method: "GET", url: "/bug" });
    expect([bug.statusCode, bug.json()]).toEqual([500, { error: "INTERNAL", message: "internal error" }]);
    const who = await server.inject({ method: "GET", url: "/who" });
    expect([who.statusCode, who.headers["www-authenticate"]]).toEqual([401, 'Bearer realm="shop"']);
    const badJson = await server.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json" },
      payload: "{",
    });
    expect([badJson.statusCode, badJson.json().error]).toEqual([400, "VALIDATION"]);
  });

  it("answers a command's outcome with its status, marking a replayed one", async () => {
    const server = app();
    const first = await server.inject({ method: "GET", url: "/outcome" });
    expect([first.statusCode, first.json(), first.headers["idempotent-replayed"]]).toEqual([
      201,
      { id: "o-1" },
      undefined,
    ]);
    const again = await server.inject({ method: "GET", url: "/outcome?replayed=1" });
    expect([again.statusCode, again.headers["idempotent-replayed"]]).toEqual([201, "true"]);
  });

  it("refuses a body giving a key twice, at any depth, naming it; parses other bodies as Fastify does", async () => {
    const server = app();
    const post = (payload: string) =>
      server.inject({
        method: "POST",
        url: "/echo",
        headers: { "content-type": "application/json" },
        payload,
      });
    const twice = await post('{"amount":1,"amount":1000000000000}');
    expect([twice.statusCode, twice.json().message]).toEqual([
      400,
      "amount: given twice in the body (each key once)",
    ]);
    const nested = await post('{"items":[{"sku":"a","sku":"b"}]}');
    expect(nested.json().message).toBe("items.sku: given twice in the body (each key once)");
    expect((await post('{"a":{"x":1},"b":{"x":2}}')).json()).toEqual({ a: { x: 1 }, b: { x: 2 } });
    const poisoned = await post('{"__proto__":{"admin":true}}');
    expect(poisoned.statusCode).toBe(400);
  });

  it("refuses NUL characters and lone surrogates in the body, the query and the path, naming where", async () => {
    const server = app();
    const nul = await server.inject({ method: "POST", url: "/echo", payload: { name: "a\u0000b" } });
    expect([nul.statusCode, nul.json().message]).toEqual([400, "body.name: must not contain NUL characters"]);
    const lone = await server.inject({ method: "GET", url: "/items/%ED%A0%80" });
    expect(lone.statusCode).toBe(400);
    const query = await server.inject({ method: "POST", url: "/echo?q=%00", payload: {} });
    expect([query.statusCode, query.json().message]).toEqual([
      400,
      "query.q: must not contain NUL characters",
    ]);
    const fine = await server.inject({ method: "POST", url: "/echo", payload: { name: "naïve 🙂" } });
    expect(fine.json()).toEqual({ name: "naïve 🙂" });
  });
});
