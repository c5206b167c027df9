import { ShardkitError } from "@shardkit/id";

export type WalletErrorCode =
  | "VALIDATION"
  | "NOT_FOUND"
  | "INSUFFICIENT_FUNDS"
  | "CURRENCY_MISMATCH"
  | "REGION_NOT_SERVED"
  | "IDEMPOTENCY_CONFLICT"
  | "IDEMPOTENCY_KEY_REQUIRED";

const STATUS: Record<WalletErrorCode, number> = {
  VALIDATION: 400,
  IDEMPOTENCY_KEY_REQUIRED: 400,
  NOT_FOUND: 404,
  INSUFFICIENT_FUNDS: 409,
  IDEMPOTENCY_CONFLICT: 409,
  CURRENCY_MISMATCH: 422,
  REGION_NOT_SERVED: 422,
};

/** A refusal the client can act on; `status` is its HTTP status. */
export class WalletError extends ShardkitError<WalletErrorCode> {
  readonly status: number;
  readonly details: unknown;
  constructor(code: WalletErrorCode, message: string, details?: unknown) {
    super(code, message);
    this.status = STATUS[code];
    this.details = details;
  }
}
