import { ShardkitError } from "@shardkit/id";

/** Error codes raised by @shardkit/scatter. */
export type ScatterErrorCode =
  /** One or more targets failed or timed out and the policy is `'fail'`. */
  | "TARGETS_FAILED"
  /** The whole-scatter deadline expired before every target answered and the policy is `'fail'`. */
  | "DEADLINE_EXCEEDED"
  /** The caller's AbortSignal fired: every running target was cancelled. */
  | "ABORTED"
  /** A cursor that is malformed, of another version, or made for another sort order. */
  | "INVALID_CURSOR"
  /** Options or arguments that make no sense (negative limit, empty sort, unknown policy...). */
  | "INVALID_OPTIONS"
  /** A source handed to a merge is not sorted by the requested order (often a collation mismatch). */
  | "UNSORTED_INPUT"
  /** A sort or aggregate value of a type the merge cannot compare (objects, mixed types...). */
  | "UNSORTABLE_VALUE";

/** Why a target has no value. */
export type MissingReason =
  /** its function threw or rejected */
  | "error"
  /** its own per-target timeout expired */
  | "timeout"
  /** the whole-scatter deadline expired while it ran or before it could start */
  | "deadline"
  /** the caller's signal aborted the scatter */
  | "aborted"
  /** `failFast` cancelled it after another target failed */
  | "cancelled";

/** A target that produced no value, with the reason and (for `'error'`) what it threw. */
export interface MissingTarget<Target = unknown> {
  readonly target: Target;
  /** the name from the `key` option (default: the target's index as a string) */
  readonly key: string;
  /** the target's position in the input */
  readonly index: number;
  readonly reason: MissingReason;
  /** what the target threw, or the abort reason given to its signal */
  readonly error: unknown;
}

/**
 * Every error @shardkit/scatter throws. A failed scatter lists every failed, timed-out or cancelled
 * target in `missing` (each with its own `error`), and `cause` is an AggregateError of those errors.
 */
export class ScatterError extends ShardkitError<ScatterErrorCode> {
  /** Targets with no value (empty for errors that are not about a scatter run). */
  readonly missing: readonly MissingTarget[];

  constructor(
    code: ScatterErrorCode,
    message: string,
    options?: { cause?: unknown; missing?: readonly MissingTarget[] },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.missing = options?.missing ?? [];
  }
}

/** A short description of a thrown value for messages. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === "string" && !error.message.includes(code)
      ? `${code}: ${error.message}`
      : error.message;
  }
  return String(error);
}
