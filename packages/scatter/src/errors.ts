import { isShardkitError as isAnyShardkitError, ShardkitError, type ShardkitGuard } from "@shardkit/id";

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

/** Which class throws which code: each code of @shardkit/scatter is thrown by exactly one class. */
export interface ScatterErrorByCode {
  TARGETS_FAILED: ScatterFailedError;
  DEADLINE_EXCEEDED: ScatterDeadlineError;
  ABORTED: ScatterAbortedError;
  INVALID_CURSOR: InvalidCursorError;
  INVALID_OPTIONS: InvalidScatterOptionsError;
  UNSORTED_INPUT: UnsortedInputError;
  UNSORTABLE_VALUE: UnsortableValueError;
}

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
 * Base class of every error @shardkit/scatter throws: one subclass per code (see
 * {@link ScatterErrorByCode}), so `instanceof ScatterError` catches all of them. Throw the
 * subclasses; this class is not meant to be constructed directly.
 */
export class ScatterError<Code extends ScatterErrorCode = ScatterErrorCode> extends ShardkitError<Code> {
  /** Targets with no value (empty for errors that are not about a scatter run). */
  readonly missing: readonly MissingTarget[];

  constructor(
    code: Code,
    message: string,
    options?: { cause?: unknown; missing?: readonly MissingTarget[] },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.missing = options?.missing ?? [];
  }
}

/** What an error about a scatter run is made with: its cause and the targets with no value. */
interface MissingOptions extends ErrorOptions {
  missing?: readonly MissingTarget[];
}

/** The class of one code whose errors carry a message and a cause (and, for a scatter run, `missing`). */
type Coded<C extends ScatterErrorCode, O> = new (message: string, options?: O) => ScatterError<C>;
function coded<C extends ScatterErrorCode, O extends MissingOptions = ErrorOptions>(code: C): Coded<C, O> {
  return class extends ScatterError<C> {
    constructor(message: string, options?: O) {
      super(code, message, options);
    }
  };
}

/**
 * `TARGETS_FAILED`: one or more targets failed or timed out and the policy is `'fail'`. `missing`
 * lists every failed, timed-out or cancelled target (each with its own `error`), and `cause` is
 * an AggregateError of those errors.
 */
export class ScatterFailedError extends coded<"TARGETS_FAILED", MissingOptions>("TARGETS_FAILED") {}

/**
 * `DEADLINE_EXCEEDED`: the whole-scatter deadline expired before every target answered and the
 * policy is `'fail'` (`missing` and `cause` as for {@link ScatterFailedError}). Also the abort
 * reason given to a target whose own timeout expired.
 */
export class ScatterDeadlineError extends coded<"DEADLINE_EXCEEDED", MissingOptions>("DEADLINE_EXCEEDED") {}

/** `ABORTED`: the caller's AbortSignal fired; `cause` is the signal's reason, `missing` the cancelled targets. */
export class ScatterAbortedError extends coded<"ABORTED", MissingOptions>("ABORTED") {}

/** `INVALID_CURSOR`: a cursor that is malformed, of another version, or made for another sort order. */
export class InvalidCursorError extends coded("INVALID_CURSOR") {}

/** `INVALID_OPTIONS`: options or arguments that make no sense (negative limit, empty sort, unknown policy...). */
export class InvalidScatterOptionsError extends coded("INVALID_OPTIONS") {}

/** `UNSORTED_INPUT`: a source handed to a merge is not sorted by the requested order (often a collation mismatch). */
export class UnsortedInputError extends coded("UNSORTED_INPUT") {}

/** `UNSORTABLE_VALUE`: a sort or aggregate value of a type the merge cannot compare (objects, mixed types...). */
export class UnsortableValueError extends coded("UNSORTABLE_VALUE") {}

/**
 * True for any shardkit error, from this copy of the package or another one (it checks a global
 * mark and the code, not the class: it is `isShardkitError` of `@shardkit/id`). With a code of
 * this package it narrows to that code's class, e.g.
 * `if (isShardkitError(err, "TARGETS_FAILED")) err.missing`; with any other code, or none, to
 * `ShardkitError`.
 */
export const isShardkitError: ShardkitGuard<ScatterErrorByCode> = isAnyShardkitError;

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
