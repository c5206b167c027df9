// Who may call what, for a Fastify service whose credentials are auth.ts's: the caller of each
// request, the namespace of its Idempotency-Key, operators' routes and a caller's own data; with
// them the inputs and answers every service has (money in minor units, bigints as strings, /health).
import { idempotencyKeyOf, shardkitHttp } from "@shardkit/prisma/fastify";
import type { HealthReport } from "@shardkit/prisma/rollout";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { z } from "zod";
import { claimsOf, type Roles, type ServiceAuth } from "./auth.js";

/** A service's error class (`serviceErrors`) declaring the codes the access checks answer with. */
export type AccessErrors = new (
  code: "UNAUTHENTICATED" | "FORBIDDEN" | "NOT_FOUND",
  message: string,
) => Error;

export interface AccessOptions<P> {
  auth: ServiceAuth<P>;
  /** auth.ts's roles: the field each role's subject is in. */
  roles: Roles;
  errors: AccessErrors;
  /** Routes called without a credential (a load balancer's `/health`). */
  open?: readonly string[];
}

/**
 * Checks the credential of every request to `app` but its `open` routes (401 before any handler),
 * and gives the handlers the caller and what follows from it.
 */
export function serviceAccess<P extends { role: string }>(app: FastifyInstance, options: AccessOptions<P>) {
  const { auth, roles, errors } = options;
  const open = new Set(options.open ?? []);
  const principals = new WeakMap<FastifyRequest, P>();
  app.addHook("onRequest", async (req) => {
    if (open.has(req.routeOptions.url ?? "")) return;
    principals.set(req, await auth.verify(req.headers.authorization));
  });
  /** The caller, from the request's credential. */
  const principalOf = (req: FastifyRequest): P => {
    const principal = principals.get(req);
    if (!principal) throw new errors("UNAUTHENTICATED", "this route needs a credential");
    return principal;
  };
  /** The subject the caller acts as (a customer's ID), or null for an operator (who may act on any). */
  const actingAs = (req: FastifyRequest): string | null => {
    const principal = principalOf(req);
    return principal.role === "admin" ? null : claimsOf(principal, roles).subject;
  };
  return {
    principalOf,
    actingAs,
    /** The request's Idempotency-Key, in its caller's own namespace (`idempotencyKeyOf`: `customer:<id>/<key>`). */
    idempotencyKey(req: FastifyRequest): string {
      const { role, subject } = claimsOf(principalOf(req), roles);
      return idempotencyKeyOf(req, `${role}:${subject}`);
    },
    /** Refuses (403) a caller who is not an operator. */
    operator(req: FastifyRequest): void {
      if (principalOf(req).role !== "admin")
        throw new errors("FORBIDDEN", "this route is for operators: it needs an admin credential");
    },
    /** Refuses a caller other than `id` itself (or an operator) with 404 `<what> <id> not found`, as if it did not exist. */
    self(req: FastifyRequest, id: string, what: string): void {
      const as = actingAs(req);
      if (as !== null && as !== id) throw new errors("NOT_FOUND", `${what} ${id} not found`);
    },
  };
}

const AMOUNT =
  "must be a positive integer number of minor units (e.g. 1250 for 12.50), as a number or a string";

/** An amount of money in minor units, as a number or a string of digits, from 1 to `max`. */
export function minorUnits(max: bigint) {
  return z
    .union([z.string(), z.number()], { error: AMOUNT })
    .transform((value, ctx) => {
      const integer =
        typeof value === "number" ? Number.isSafeInteger(value) && value >= 0 : /^\d{1,19}$/.test(value);
      if (!integer) {
        ctx.addIssue({ code: "custom", message: AMOUNT });
        return z.NEVER;
      }
      return BigInt(value);
    })
    .refine((value) => value > 0n, { error: "must be greater than 0" })
    .refine((value) => value <= max, { error: `must be at most ${max} minor units` });
}

/**
 * Answers bigints (money) as strings, and `GET /health`: each shard's state, for load balancers and
 * people, 200 while any shard is up (a shard that is down fails only its own requests), 503 when none is.
 */
export function serviceAnswers(app: FastifyInstance, service: { health(): Promise<HealthReport> }): void {
  app.setReplySerializer((payload) =>
    JSON.stringify(payload, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  );
  app.get("/health", async (_req, reply) => {
    const report = await service.health();
    return reply.code(report.status === "down" ? 503 : 200).send(report);
  });
}

export interface ServiceAppOptions<P> extends AccessOptions<P> {
  /** The realm a 401 names in `WWW-Authenticate: Bearer realm="..."` (the service's name). */
  realm: string;
  /** Fastify's request log (default off). */
  logger?: boolean | undefined;
  /** The service, when it answers `GET /health` (open to callers without a credential) and money (`serviceAnswers`). */
  health?: { health(): Promise<HealthReport> } | undefined;
}

/**
 * A service's Fastify app, before its routes: the credential of every request checked but open
 * routes' (`serviceAccess`, whose checks it returns as `access`); every error answered as JSON with
 * its status, and bodies giving a key twice or text PostgreSQL would refuse answered 400 before any
 * handler (`shardkitHttp`); with `health`, bigints as strings and `GET /health` (`serviceAnswers`).
 */
export function serviceApp<P extends { role: string }>(options: ServiceAppOptions<P>) {
  const { realm, logger = false, health, ...access } = options;
  const app = Fastify({ logger });
  const checks = serviceAccess(
    app,
    health ? { ...access, open: [...(access.open ?? []), "/health"] } : access,
  );
  shardkitHttp(app, { realm });
  if (health) serviceAnswers(app, health);
  return { app, access: checks };
}
