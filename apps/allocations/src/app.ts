import { parseInput, replyOutcome } from "@shardkit/prisma/fastify";
import { serviceApp } from "@shardkit/service-kit/http";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { AllocationService } from "./allocation-service.js";
import { type Auth, ROLES } from "./auth.js";
import { AllocationsError } from "./errors.js";

const UNITS = "must be a whole number from 1 to 1000000";
const units = z.int({ error: UNITS }).min(1, { error: UNITS }).max(1_000_000, { error: UNITS });
/** Text of at most `max` characters (NUL characters and lone surrogates are refused before: shardkitHttp). */
const text = (max: number) => z.string().trim().min(1).max(max);
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

/**
 * The HTTP API of the allocations service. Every route needs a credential (`Authorization: Bearer
 * <token>`, see auth.ts): creating buckets is for operators; a desk holds and confirms units as
 * itself only (a body naming another desk is 403) and reads buckets.
 */
export function buildApp(service: AllocationService, options: { auth: Auth; logger?: boolean }) {
  const { app, access } = serviceApp({
    ...options,
    roles: ROLES,
    errors: AllocationsError,
    realm: "allocations",
  });
  const { principalOf, operator, idempotencyKey } = access;
  /** A desk acts as itself: the desk a body names must be the caller's (an operator may name any). */
  const asDesk = (req: FastifyRequest, desk: string) => {
    const principal = principalOf(req);
    if (principal.role === "admin") return;
    if (principal.desk !== desk) {
      throw new AllocationsError(
        "FORBIDDEN",
        `desk: this credential acts for desk "${principal.desk}", not "${desk}"`,
      );
    }
  };

  app.post("/buckets", async (req, reply) => {
    operator(req);
    const body = parseInput(schemas.bucket, req.body);
    return replyOutcome(reply, 201, await service.createBucket(body, idempotencyKey(req)));
  });
  app.post<{ Params: { bucketId: string } }>("/buckets/:bucketId/holds", async (req, reply) => {
    const body = parseInput(schemas.hold, req.body);
    asDesk(req, body.desk);
    return replyOutcome(
      reply,
      201,
      await service.hold(req.params.bucketId, body.units, body.desk, idempotencyKey(req)),
    );
  });
  // Routed by bucket_id: the decision runs on the bucket's shard, wherever that is now.
  app.post("/allocations/confirm", async (req, reply) => {
    const body = parseInput(schemas.confirm, req.body);
    asDesk(req, body.desk);
    const outcome = await service.confirm(
      { bucketId: body.bucket_id, desk: body.desk, holdId: body.hold_id, units: body.units },
      idempotencyKey(req),
    );
    return replyOutcome(reply, 201, outcome);
  });
  app.get<{ Params: { bucketId: string } }>("/buckets/:bucketId", (req) =>
    service.getBucket(req.params.bucketId),
  );
  return app;
}
