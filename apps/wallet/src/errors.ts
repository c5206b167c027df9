import { ShardkitError } from "@shardkit/id";

export type WalletErrorCode =
  | "VALIDATION"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "INSUFFICIENT_FUNDS"
  | "CURRENCY_MISMATCH"
  | "REGION_NOT_SERVED"
  | "IDEMPOTENCY_CONFLICT"
  | "IDEMPOTENCY_KEY_REQUIRED"
  | "SHARD_UNAVAILABLE";

const STATUS: Record<WalletErrorCode, number> = {
  VALIDATION: 400,
  IDEMPOTENCY_KEY_REQUIRED: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  INSUFFICIENT_FUNDS: 409,
  IDEMPOTENCY_CONFLICT: 409,
  CURRENCY_MISMATCH: 422,
  REGION_NOT_SERVED: 422,
  SHARD_UNAVAILABLE: 503,
};

/** A refusal the client can act on; `status` is its HTTP status (503 comes with a retry hint). */
export class WalletError extends ShardkitError<WalletErrorCode> {
  readonly status: number;
  /** Extra fields of the error response (the `shard` of SHARD_UNAVAILABLE). */
  readonly body: Record<string, unknown>;
  constructor(
    code: WalletErrorCode,
    message: string,
    options: { body?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(code, message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = STATUS[code];
    this.body = options.body ?? {};
  }
}
