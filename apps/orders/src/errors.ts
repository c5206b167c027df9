import { ShardkitError } from "@shardkit/id";

export type OrdersErrorCode =
  | "VALIDATION"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "CREDIT_LIMIT_EXCEEDED"
  | "ORDER_NOT_OPEN"
  | "CURRENCY_MISMATCH"
  | "REGION_NOT_SERVED"
  | "IDEMPOTENCY_CONFLICT"
  | "IDEMPOTENCY_KEY_REQUIRED"
  | "SHARDS_UNAVAILABLE";

const STATUS: Record<OrdersErrorCode, number> = {
  VALIDATION: 400,
  IDEMPOTENCY_KEY_REQUIRED: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CREDIT_LIMIT_EXCEEDED: 409,
  ORDER_NOT_OPEN: 409,
  IDEMPOTENCY_CONFLICT: 409,
  CURRENCY_MISMATCH: 422,
  REGION_NOT_SERVED: 422,
  SHARDS_UNAVAILABLE: 503,
};

/**
 * A refusal the client can act on; `status` is its HTTP status. `body` holds extra fields of the
 * error response (`missing` shards for SHARDS_UNAVAILABLE).
 */
export class OrdersError extends ShardkitError<OrdersErrorCode> {
  readonly status: number;
  readonly body: Record<string, unknown>;
  constructor(code: OrdersErrorCode, message: string, body: Record<string, unknown> = {}) {
    super(code, message);
    this.status = STATUS[code];
    this.body = body;
  }
}
