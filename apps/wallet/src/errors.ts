import { serviceErrors } from "@shardkit/prisma/fastify";

/**
 * A refusal the client can act on: `status` is its HTTP status (503 comes with a retry hint), `body`
 * extra fields of the answer (the `shard` of SHARD_UNAVAILABLE).
 */
export class WalletError extends serviceErrors({
  VALIDATION: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  INSUFFICIENT_FUNDS: 409,
  CURRENCY_MISMATCH: 422,
  REGION_NOT_SERVED: 422,
  ATOMIC_UNAVAILABLE: 501,
  SHARD_UNAVAILABLE: 503,
}) {}

export type WalletErrorCode = WalletError["code"];
