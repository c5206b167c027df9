import { serviceErrors } from "@shardkit/prisma/fastify";

/**
 * A refusal the client can act on: `status` is its HTTP status (503 comes with a retry hint), `body`
 * extra fields of the answer (the `shard` or the `missing` shards of SHARD_UNAVAILABLE).
 */
export class OrdersError extends serviceErrors({
  VALIDATION: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CREDIT_LIMIT_EXCEEDED: 409,
  ORDER_NOT_OPEN: 409,
  CURRENCY_MISMATCH: 422,
  REGION_NOT_SERVED: 422,
  SHARD_UNAVAILABLE: 503,
}) {}

export type OrdersErrorCode = OrdersError["code"];
