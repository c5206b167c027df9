import { ShardkitError } from "@shardkit/id";

export type AllocationsErrorCode =
  | "VALIDATION"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "SOLD_OUT"
  | "HOLD_NOT_ACTIVE"
  | "IDEMPOTENCY_CONFLICT"
  | "IDEMPOTENCY_KEY_REQUIRED"
  | "SHARD_UNAVAILABLE";

const STATUS: Record<AllocationsErrorCode, number> = {
  VALIDATION: 400,
  IDEMPOTENCY_KEY_REQUIRED: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SOLD_OUT: 409,
  HOLD_NOT_ACTIVE: 409,
  IDEMPOTENCY_CONFLICT: 409,
  SHARD_UNAVAILABLE: 503,
};

/** A refusal the client can act on; `status` is its HTTP status. */
export class AllocationsError extends ShardkitError<AllocationsErrorCode> {
  readonly status: number;
  readonly body: Record<string, unknown>;
  constructor(code: AllocationsErrorCode, message: string, body: Record<string, unknown> = {}) {
    super(code, message);
    this.status = STATUS[code];
    this.body = body;
  }
}
