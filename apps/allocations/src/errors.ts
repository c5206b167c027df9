import { serviceErrors } from "@shardkit/prisma/fastify";

/** A refusal the client can act on: `status` is its HTTP status, `body` extra fields of the answer. */
export class AllocationsError extends serviceErrors({
  VALIDATION: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SOLD_OUT: 409,
  HOLD_NOT_ACTIVE: 409,
  SHARD_UNAVAILABLE: 503,
}) {}

export type AllocationsErrorCode = AllocationsError["code"];
