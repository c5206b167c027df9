import { isShardkitError } from "@shardkit/id";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { z } from "zod";
import type { AllocationService, Outcome } from "./allocation-service.js";
import type { Auth, Principal } from "./auth.js";
import { AllocationsError } from "./errors.js";
import { refuseDuplicateKeys } from "./json-body.js";

const UNITS = "must be a whole number from 1 to 1000000";
const units = z.int({ error: UNITS }).min(1, { error: UNITS }).max(1_000_000, { error: UNITS });
/** A lone UTF-16 surrogate (text PostgreSQL would store altered); pairs are fine. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const text = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((v) => !v.includes("\0") && !LONE_SURROGATE.test(v), {
      error: "must not contain NUL characters or lone surrogates",
    });
const id = z.string({ error: "must be an ID" }).min(1, { error: "must be an ID" });
const schemas = {
  bucket: z.strictObject({
    name: text(200),
    capacity: units,
    shard: z
      .string()
      .regex(/^\d{1,3}\/\d{1,2}$/, { error: 'must be a shard key such as "0/1"' })
      .optional(),
  }),
  hold: z.strictObject({ units, desk: text(100) }),
  confirm: z.strictObject({
    bucket_id: id,
    desk: text(100),
    hold_id: id.optional(),
    units: units.optional(),
  }),
};

function parse<T>(schema: z.ZodType<T, unknown>, value: unknown): T {
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    const issues = result.error.issues
      .slice(0, 10)
      .map((i) => `${i.path.map(String).join(".") || "body"}: ${i.message}`.slice(0, 200));
    throw new AllocationsError("VALIDATION", issues.join("; "));
  }
  return result.data;
}

/**
 * The request's Idempotency-Key, in its caller's own namespace: a key one caller sent never meets
 * another's (no 409 that says another customer used it, no key taken ahead of its owner).
 */
function idempotencyKey(request: FastifyRequest): string {
  const key = request.headers["idempotency-key"];
  if (typeof key !== "string" || !/^[\w.:-]{8,128}$/.test(key)) {
    throw new AllocationsError(
      "IDEMPOTENCY_KEY_REQUIRED",
      "every change needs an Idempotency-Key header (8 to 128 letters, digits, '.', ':', '_' or '-')",
    );
  }
  const principal = request.principal;
  if (!principal) throw new AllocationsError("UNAUTHENTICATED", "this route needs a credential");
  return `${principal.role === "admin" ? `admin:${principal.subject}` : `desk:${principal.desk}`}/${key}`;
}

function send<T>(reply: FastifyReply, status: number, outcome: Outcome<T>) {
  if (outcome.replayed) reply.header("idempotent-replayed", "true");
  return reply.code(status).send(outcome.result);
}

declare module "fastify" {
  interface FastifyRequest {
    /** The caller, from the request's credential. */
    principal: Principal | null;
  }
}

/**
 * The HTTP API of the allocations service. Every route needs a credential (`Authorization: Bearer
 * <token>`, see auth.ts): creating buckets is for operators; a desk holds and confirms units as
 * itself only (a body naming another desk is 403) and reads buckets.
 */
export function buildApp(service: AllocationService, options: { auth: Auth; logger?: boolean }) {
  const { auth } = options;
  const app = Fastify({ logger: options.logger ?? false });
  app.decorateRequest("principal", null);
  app.addHook("onRequest", async (req) => {
    req.principal = await auth.verify(req.headers.authorization);
  });
  const operator = (req: FastifyRequest) => {
    if (req.principal?.role !== "admin") {
      throw new AllocationsError("FORBIDDEN", "this route is for operators: it needs an admin credential");
    }
  };
  /** A desk acts as itself: the desk a body names must be the caller's (an operator may name any). */
  const asDesk = (req: FastifyRequest, desk: string) => {
    const principal = req.principal;
    if (principal?.role === "admin") return;
    if (principal?.role !== "desk" || principal.desk !== desk) {
      throw new AllocationsError(
        "FORBIDDEN",
        `desk: this credential acts for desk "${principal?.role === "desk" ? principal.desk : ""}", not "${desk}"`,
      );
    }
  };
  // A body whose object gives a key twice is a 400 naming the key (JSON.parse would keep the last).
  refuseDuplicateKeys(app, (message) => new AllocationsError("VALIDATION", message));
  app.setErrorHandler((error, request, reply) => {
    if (error instanceof AllocationsError) {
      if (error.status === 503) reply.header("retry-after", "1");
      if (error.status === 401) reply.header("www-authenticate", 'Bearer realm="allocations"');
      return reply.code(error.status).send({ ...error.body, error: error.code, message: error.message });
    }
    if (isShardkitError(error, "INVALID_SHARDED_ID")) {
      return reply.code(400).send({ error: "VALIDATION", message: error.message });
    }
    const status = (error as { statusCode?: number }).statusCode;
    if (typeof status === "number" && status >= 400 && status < 500) {
      return reply
        .code(status)
        .send({ error: "VALIDATION", message: (error as Error).message.slice(0, 500) });
    }
    request.log.error(error);
    return reply.code(500).send({ error: "INTERNAL", message: "internal error" });
  });

  app.post("/buckets", async (req, reply) => {
    operator(req);
    const body = parse(schemas.bucket, req.body);
    return send(reply, 201, await service.createBucket(body, idempotencyKey(req)));
  });
  app.post<{ Params: { bucketId: string } }>("/buckets/:bucketId/holds", async (req, reply) => {
    const body = parse(schemas.hold, req.body);
    asDesk(req, body.desk);
    return send(
      reply,
      201,
      await service.hold(req.params.bucketId, body.units, body.desk, idempotencyKey(req)),
    );
  });
  // Routed by bucket_id: the decision runs on the bucket's shard, wherever that is now.
  app.post("/allocations/confirm", async (req, reply) => {
    const body = parse(schemas.confirm, req.body);
    asDesk(req, body.desk);
    const outcome = await service.confirm(
      { bucketId: body.bucket_id, desk: body.desk, holdId: body.hold_id, units: body.units },
      idempotencyKey(req),
    );
    return send(reply, 201, outcome);
  });
  app.get<{ Params: { bucketId: string } }>("/buckets/:bucketId", (req) =>
    service.getBucket(req.params.bucketId),
  );
  return app;
}
