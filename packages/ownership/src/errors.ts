import { isShardkitError as isAnyShardkitError, type ShardIdentifier, ShardkitError } from "@shardkit/id";

/** Error codes raised by @shardkit/ownership; each is thrown by exactly one class. */
export type OwnershipErrorCode = keyof OwnershipErrorByCode;

/** Base class of every error @shardkit/ownership throws (a `ShardkitError` with a typed code). */
export class OwnershipError<
  Code extends OwnershipErrorCode = OwnershipErrorCode,
> extends ShardkitError<Code> {}

/** What a database said about a shard it refused a write for. */
export interface Refusal {
  shard: ShardIdentifier;
  /** Its epoch there (0 when it has no record of the shard). */
  epoch: number;
  /** Its state there: `fenced` (between owners), `moved` (a tombstone), `incoming` (not switched yet). */
  state: string;
  /** For `moved`: the database that owns it now. */
  peer: string | null;
}

/**
 * A write reached a database that does not own its shard, and the database refused it (its fence),
 * after the router's refreshes and retries: the shard is between owners for longer than the retry
 * budget, or the map cannot say who owns it.
 */
export class StaleOwnerError extends OwnershipError<"STALE_OWNER"> {
  readonly refusal: Refusal;
  constructor(refusal: Refusal, options?: { cause?: unknown }) {
    super(
      "STALE_OWNER",
      `shard ${refusal.shard.key} is not owned by the database the write reached (${refusal.state} at epoch ${refusal.epoch}${refusal.peer ? `, now owned by ${refusal.peer}` : ""})`,
      options,
    );
    this.refusal = refusal;
  }
}

/** The partition map read from the databases cannot be right: every problem is listed, nothing is applied. */
export class InvalidMapError extends OwnershipError<"INVALID_MAP"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("INVALID_MAP", `Invalid partition map:\n${list(issues)}`);
    this.issues = issues;
  }
}

/** A change of owner expected another epoch or state than the shard has: someone else changed it first. Nothing was changed. */
export class EpochConflictError extends OwnershipError<"EPOCH_CONFLICT"> {
  readonly shard: ShardIdentifier;
  constructor(shard: ShardIdentifier, message: string) {
    super("EPOCH_CONFLICT", `shard ${shard.key}: ${message}`);
    this.shard = shard;
  }
}

/** Options of the partition map or of a transfer that cannot work. */
export class OwnershipOptionsError extends OwnershipError<"INVALID_OWNERSHIP_OPTIONS"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("INVALID_OWNERSHIP_OPTIONS", `Invalid options:\n${list(issues)}`);
    this.issues = issues;
  }
}

/** A move that cannot start: every problem found before anything changed (nothing did). */
export class MovePrecheckError extends OwnershipError<"MOVE_PRECHECK"> {
  readonly issues: string[];
  constructor(shard: ShardIdentifier, issues: string[]) {
    super("MOVE_PRECHECK", `shard ${shard.key} cannot move:\n${list(issues)}`);
    this.issues = issues;
  }
}

/** The copy did not match the source after the fence: the move was undone, the source owns the shard again. */
export class MoveVerifyError extends OwnershipError<"MOVE_VERIFY"> {
  readonly mismatches: string[];
  constructor(shard: ShardIdentifier, mismatches: string[]) {
    super(
      "MOVE_VERIFY",
      `shard ${shard.key}: the copy does not match the source, the move was undone:\n${list(mismatches)}`,
    );
    this.mismatches = mismatches;
  }
}

/** A live move's copy or catch-up did not finish within its `timeoutMs`: the move was undone, the source owns the shard. */
export class MoveTimeoutError extends OwnershipError<"MOVE_TIMEOUT"> {
  readonly shard: ShardIdentifier;
  constructor(shard: ShardIdentifier, what: string, timeoutMs: number) {
    super(
      "MOVE_TIMEOUT",
      `shard ${shard.key}: ${what} did not finish within ${timeoutMs} ms; the move was undone`,
    );
    this.shard = shard;
  }
}

/** Which class throws which code. */
export interface OwnershipErrorByCode {
  STALE_OWNER: StaleOwnerError;
  INVALID_MAP: InvalidMapError;
  EPOCH_CONFLICT: EpochConflictError;
  INVALID_OWNERSHIP_OPTIONS: OwnershipOptionsError;
  MOVE_PRECHECK: MovePrecheckError;
  MOVE_VERIFY: MoveVerifyError;
  MOVE_TIMEOUT: MoveTimeoutError;
}

/**
 * True for any shardkit error (from this copy of the package or another). With a code of this
 * package it narrows to that code's class: `if (isShardkitError(err, "STALE_OWNER")) err.refusal`.
 */
export const isShardkitError: {
  <C extends OwnershipErrorCode>(value: unknown, code: C): value is OwnershipErrorByCode[C];
  <C extends string = string>(value: unknown, code?: C): value is ShardkitError<C>;
} = isAnyShardkitError;

function list(issues: readonly string[]): string {
  return issues.map((i) => `  - ${i}`).join("\n");
}
