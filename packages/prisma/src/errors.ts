import { type ShardIdentifier, ShardkitError } from "@shardkit/id";

/** Error codes raised by @shardkit/prisma. */
export type PrismaShardErrorCode =
  | "INVALID_CONFIG"
  | "UNKNOWN_SHARD"
  | "SHARD_KEY_REQUIRED"
  | "CROSS_SHARD"
  | "PARTIAL_COMMIT"
  | "UNSUPPORTED"
  | "ROLLOUT_FAILED"
  | "SCATTER_REFUSED"
  | "IDEMPOTENCY_CONFLICT";

/** Base class of every error @shardkit/prisma throws (a `ShardkitError` with a typed code). */
export class ShardRoutingError<
  Code extends PrismaShardErrorCode = PrismaShardErrorCode,
> extends ShardkitError<Code> {}

/** Registry configuration that cannot work: caught at start-up, before any connection. */
export class RegistryConfigError extends ShardRoutingError<"INVALID_CONFIG"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("INVALID_CONFIG", `Invalid shard registry config:\n${issues.map((i) => `  - ${i}`).join("\n")}`);
    this.issues = issues;
  }
}

/** An ID names a shard this registry does not have (and `unknownShard` is `'fail'`). */
export class UnknownShardError extends ShardRoutingError<"UNKNOWN_SHARD"> {
  readonly shard: ShardIdentifier;
  constructor(shard: ShardIdentifier, known: readonly ShardIdentifier[]) {
    const list = known.length > 8 ? `${known.length} shards` : known.map((s) => s.key).join(", ");
    super("UNKNOWN_SHARD", `Shard ${shard.key} is not in the registry (it has ${list})`);
    this.shard = shard;
  }
}

/** An operation whose shard cannot be known from its arguments, refused rather than guessed. */
export class ShardKeyRequiredError extends ShardRoutingError<"SHARD_KEY_REQUIRED"> {
  readonly model: string | undefined;
  readonly operation: string;
  constructor(model: string | undefined, operation: string, hint: string) {
    super("SHARD_KEY_REQUIRED", `${model ? `${model}.` : ""}${operation} names no shard: ${hint}`);
    this.model = model;
    this.operation = operation;
  }
}

/** Work that would span shards where one shard is required. */
export class CrossShardError extends ShardRoutingError<"CROSS_SHARD"> {
  readonly shards: ShardIdentifier[];
  constructor(message: string, shards: readonly ShardIdentifier[]) {
    super("CROSS_SHARD", message);
    this.shards = [...shards];
  }
}

/** What happened on one shard of a cross-shard unit of work. */
export interface ShardFailure {
  shard: ShardIdentifier;
  error: unknown;
}

/**
 * A cross-shard unit of work that committed on some shards and not on others. Nothing is
 * retried or compensated automatically: `committed` are durable, `failed` rolled back,
 * `notAttempted` never started.
 */
export class PartialCommitError extends ShardRoutingError<"PARTIAL_COMMIT"> {
  readonly committed: ShardIdentifier[];
  readonly failed: ShardFailure[];
  readonly notAttempted: ShardIdentifier[];
  constructor(committed: ShardIdentifier[], failed: ShardFailure[], notAttempted: ShardIdentifier[]) {
    const keys = (list: ShardIdentifier[]) => (list.length ? list.map((s) => s.key).join(", ") : "none");
    super(
      "PARTIAL_COMMIT",
      `Cross-shard action partially committed: committed [${keys(committed)}], failed [${keys(failed.map((f) => f.shard))}], not attempted [${keys(notAttempted)}]`,
      { cause: failed[0]?.error },
    );
    this.committed = committed;
    this.failed = failed;
    this.notAttempted = notAttempted;
  }
}

/** An operation shape the router cannot run across shards without changing its meaning. */
export class UnsupportedShardOperationError extends ShardRoutingError<"UNSUPPORTED"> {
  constructor(message: string) {
    super("UNSUPPORTED", message);
  }
}

/**
 * A keyless read that would scatter wider than allowed (`maxShards`) or without a limit
 * (`requireLimit`), refused before any query runs. Override per call with `db.$scatter({ ... })`.
 */
export class ScatterRefusedError extends ShardRoutingError<"SCATTER_REFUSED"> {
  readonly model: string;
  readonly operation: string;
  readonly reason: "maxShards" | "requireLimit";
  constructor(model: string, operation: string, reason: "maxShards" | "requireLimit", message: string) {
    super("SCATTER_REFUSED", `${model}.${operation}: ${message}`);
    this.model = model;
    this.operation = operation;
    this.reason = reason;
  }
}
