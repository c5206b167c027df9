import {
  isShardkitError as isAnyShardkitError,
  type ShardIdentifier,
  ShardkitError,
  type ShardkitGuard,
} from "@shardkit/id";

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
  /** The move attempt named by the record (the one that fenced it, moved it away, or copies it in); null when none. */
  attempt?: string | null;
  /**
   * For `fenced`: the lease of the move holding the fence, as the refusing database read it
   * (`lapsed`: its mover stopped renewing it, so routers give the shard back to its owner). Null
   * when no move holds it.
   */
  move?: { step: string; holder: string; attempt: string; lapsed: boolean } | null;
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

/**
 * Records of the partition map that cannot be right (an epoch behind one already seen, an unknown
 * state, two owners, an owner record missing): a routed call to a shard whose records are so (its
 * `shard`) fails with it until the records are repaired, and the map's other shards keep working.
 * An API answers it as 503 (`isShardUnavailable` of `@shardkit/prisma` says so), naming the shard.
 */
export class InvalidMapError extends OwnershipError<"INVALID_MAP"> {
  readonly issues: string[];
  /** The shard whose records these are; undefined for problems of the map as a whole. */
  readonly shard: ShardIdentifier | undefined;
  constructor(issues: string[], shard?: ShardIdentifier) {
    super(
      "INVALID_MAP",
      shard
        ? `shard ${shard.key}: its ownership records cannot be right (calls to it are refused until they are repaired):\n${list(issues)}`
        : `Invalid partition map:\n${list(issues)}`,
    );
    this.issues = issues;
    this.shard = shard;
  }
}

/**
 * Databases that did not answer within the time allowed (`timeoutMs`, `--timeout`): a slow answer
 * is reported as such, never taken for an absent record. Raised when a map opens with no database
 * answering, when a routed call reaches a shard whose database has not answered the map's read yet,
 * and when a move cannot read a database it needs. Nothing was changed.
 */
export class DatabasesUnansweredError extends OwnershipError<"NO_ANSWER"> {
  readonly databases: { database: string; error: string }[];
  constructor(what: string, databases: { database: string; error: string }[]) {
    super(
      "NO_ANSWER",
      `${what}: ${databases.map((d) => `${d.database} (${d.error})`).join(", ")} did not answer`,
    );
    this.databases = databases;
  }
}

/** A move of the shard is under way: its lease is live. Nothing was changed. */
export class MoveInProgressError extends OwnershipError<"MOVE_IN_PROGRESS"> {
  readonly shard: ShardIdentifier;
  /** Who holds the lease, at which step, to which database, and in how many ms it lapses unless renewed. */
  readonly lease: { holder: string; step: string; to: string; expiresInMs: number; database: string };
  constructor(
    shard: ShardIdentifier,
    lease: { holder: string; step: string; to: string; expiresInMs: number; database: string },
  ) {
    super(
      "MOVE_IN_PROGRESS",
      lease.expiresInMs > 0 && lease.step !== "abandoned"
        ? `shard ${shard.key} is being moved to ${lease.to} by ${lease.holder} (step ${lease.step}; its lease on ${lease.database} lapses in ${(lease.expiresInMs / 1000).toFixed(1)} s unless renewed): another move may take over only once it has lapsed`
        : `shard ${shard.key} has a stopped move to ${lease.to} (step ${lease.step}, by ${lease.holder}; its lease on ${lease.database} lapsed): moveShard (shardkit move) takes it over and finishes or undoes it first`,
    );
    this.shard = shard;
    this.lease = lease;
  }
}

/**
 * This mover no longer holds its lease: another mover took the move over after the lease lapsed,
 * or a router gave the fenced shard back to its owner. The step was refused; nothing was changed by it.
 */
export class MoveLeaseLostError extends OwnershipError<"MOVE_LEASE_LOST"> {
  readonly shard: ShardIdentifier;
  constructor(shard: ShardIdentifier, now: string) {
    super(
      "MOVE_LEASE_LOST",
      `shard ${shard.key}: this mover lost its lease (${now}); it can change nothing more, and whoever holds the move now finishes or undoes it`,
    );
    this.shard = shard;
  }
}

/**
 * A move failed part-way. `step` is where; `left` says what it left: `undone` (the source owns the
 * shard again, nothing of the move is left), or `half-done` (the shard may be fenced, at most until
 * the lease lapses and routers give it back, or switched, owned by the target once it answers); and
 * `rerun` what running the same move again does first (`undo` or `finish`). The cause is `cause`.
 */
export class MoveFailedError extends OwnershipError<"MOVE_FAILED"> {
  readonly shard: ShardIdentifier;
  readonly step: string;
  readonly left: "undone" | "half-done" | "taken-over";
  readonly rerun: "undo" | "finish" | null;
  constructor(
    shard: ShardIdentifier,
    failure: {
      step: string;
      left: "undone" | "half-done" | "taken-over";
      rerun: "undo" | "finish" | null;
      what: string;
    },
    options?: { cause?: unknown },
  ) {
    const cause =
      options?.cause instanceof Error
        ? options.cause.message.split("\n").filter(Boolean).at(-1)
        : String(options?.cause ?? "");
    super(
      "MOVE_FAILED",
      `shard ${shard.key}: the move failed at ${failure.step}${cause ? ` (${cause})` : ""}. ${failure.what}`,
      options,
    );
    this.shard = shard;
    this.step = failure.step;
    this.left = failure.left;
    this.rerun = failure.rerun;
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

/**
 * What a live move waits on is gone (its subscription at the target, or its replication slot at the
 * source: dropped by hand): the move cannot go on and stops at once, undone, rather than wait out
 * its time. The cause of the `MoveFailedError` the move throws.
 */
export class MoveObjectGoneError extends OwnershipError<"MOVE_OBJECT_GONE"> {
  /** What is gone, e.g. "the move's subscription shardkit_move_1_ab12". */
  readonly what: string;
  /** The database it was on. */
  readonly database: string;
  constructor(what: string, database: string) {
    super(
      "MOVE_OBJECT_GONE",
      `${what} is gone from ${database} (dropped by hand?): the move cannot go on without it`,
    );
    this.what = what;
    this.database = database;
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

/**
 * A part of a move did not finish within its budget (the copy within `copyTimeoutMs`, the freeze
 * within `freezeBudgetMs`), or a database it waited for did not answer in time. `moveShard` throws
 * it as it is when the move was then undone (`undone`: the source owns the shard, nothing of the
 * move is left) or stopped before it held its lease (its checks, or taking the lease: a lease taken
 * late lapses by itself within `leaseMs`); otherwise it is the cause of a `MoveFailedError` saying
 * what was left.
 */
export class MoveTimeoutError extends OwnershipError<"MOVE_TIMEOUT"> {
  readonly shard: ShardIdentifier;
  /** What did not finish in time. */
  readonly what: string;
  readonly timeoutMs: number;
  readonly undone: boolean;
  constructor(
    shard: ShardIdentifier,
    what: string,
    timeoutMs: number,
    options: { undone?: boolean; cause?: unknown } = {},
  ) {
    super(
      "MOVE_TIMEOUT",
      `shard ${shard.key}: ${what} did not finish within ${timeoutMs} ms${options.undone ? "; the move was undone" : ""}`,
      options.cause !== undefined ? { cause: options.cause } : undefined,
    );
    this.shard = shard;
    this.what = what;
    this.timeoutMs = timeoutMs;
    this.undone = options.undone ?? false;
  }
}

/** One thing wrong with the input of `planBalance`: the field (`load["0/1"].load`, `options.threshold`) and what. */
export interface BalanceInputIssue {
  field: string;
  problem: string;
}

/**
 * The input of `planBalance` cannot be planned from (a negative or non-finite load, a shard placed
 * on a database the placement does not list, a shard placed twice, an option out of range): every
 * problem found, each naming its field. Nothing was planned.
 */
export class BalanceInputError extends OwnershipError<"BALANCE_INPUT"> {
  readonly issues: BalanceInputIssue[];
  constructor(issues: BalanceInputIssue[]) {
    super("BALANCE_INPUT", `Cannot plan a balance:\n${list(issues.map((i) => `${i.field}: ${i.problem}`))}`);
    this.issues = issues;
  }
}

/**
 * A move to a database the shard's group may not live on: the target's labels break a placement rule
 * of the registry (`registry.placement`). `rule` says which and what the target has. Refused before
 * anything was read or changed.
 */
export class PlacementRuleError extends OwnershipError<"PLACEMENT_RULE"> {
  readonly shard: ShardIdentifier;
  /** The target's name. */
  readonly database: string;
  /** The rule broken and what the target has (`placement[0]: group 1 may live only on region=eu; ...`). */
  readonly rule: string;
  constructor(shard: ShardIdentifier, database: string, rule: string) {
    super("PLACEMENT_RULE", `shard ${shard.key} may not move to ${database}: ${rule} (nothing was changed)`);
    this.shard = shard;
    this.database = database;
    this.rule = rule;
  }
}

/** Who holds the fleet's balance lease (`BalanceLeaseHeldError`), as the database holding it says. */
export interface BalanceLeaseHolder {
  host: string;
  pid: number;
  /** The run's id (random, per run). */
  run: string;
  /** What it runs: `balance`, or `drain <database>`. */
  what: string;
  /** The database whose `shardkit."BalanceLease"` holds the lease. */
  database: string;
  /** When it lapses unless renewed (that database's clock). */
  expiresAt: Date;
  /** In how many ms, as that database counted when it refused. */
  expiresInMs: number;
}

/**
 * Another balance or drain run holds the fleet's balance lease: one runs per fleet at a time.
 * `holder` names it and when its lease lapses unless renewed. Nothing was read or changed.
 */
export class BalanceLeaseHeldError extends OwnershipError<"BALANCE_LEASE_HELD"> {
  readonly holder: BalanceLeaseHolder;
  constructor(holder: BalanceLeaseHolder) {
    super(
      "BALANCE_LEASE_HELD",
      `another run holds the fleet's balance lease: ${holder.what} by host ${holder.host}, pid ${holder.pid}, run ${holder.run} (on ${holder.database}); it expires at ${holder.expiresAt.toISOString()} (in ${(Math.max(0, holder.expiresInMs) / 1000).toFixed(1)} s) unless renewed. One balance or drain runs per fleet at a time: run it again once that one has ended (nothing was changed)`,
    );
    this.holder = holder;
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
  MOVE_OBJECT_GONE: MoveObjectGoneError;
  NO_ANSWER: DatabasesUnansweredError;
  MOVE_IN_PROGRESS: MoveInProgressError;
  MOVE_LEASE_LOST: MoveLeaseLostError;
  MOVE_FAILED: MoveFailedError;
  PLACEMENT_RULE: PlacementRuleError;
  BALANCE_INPUT: BalanceInputError;
  BALANCE_LEASE_HELD: BalanceLeaseHeldError;
}

/**
 * True for any shardkit error (from this copy of the package or another). With a code of this
 * package it narrows to that code's class: `if (isShardkitError(err, "STALE_OWNER")) err.refusal`.
 */
export const isShardkitError: ShardkitGuard<OwnershipErrorByCode> = isAnyShardkitError;

function list(issues: readonly string[]): string {
  return issues.map((i) => `  - ${i}`).join("\n");
}
