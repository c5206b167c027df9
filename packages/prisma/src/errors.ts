// The errors of @shardkit/prisma: one class per code over one base (longer than 400 lines: each code's
// class with the fields a caller reads, and one place lists them all).
import {
  isShardkitError as isAnyShardkitError,
  type ShardIdentifier,
  ShardkitError,
  type ShardkitGuard,
} from "@shardkit/id";
import type { RolloutReport } from "./schema/rollout-report.js";

/** Error codes raised by @shardkit/prisma; each is thrown by exactly one class. */
export type PrismaShardErrorCode = keyof PrismaErrorByCode;

/** Base class of every error @shardkit/prisma throws (a `ShardkitError` with a typed code). */
export class ShardRoutingError<
  Code extends PrismaShardErrorCode = PrismaShardErrorCode,
> extends ShardkitError<Code> {}

/** Registry configuration that cannot work: caught at start-up, before any connection. */
export class RegistryConfigError extends ShardRoutingError<"INVALID_CONFIG"> {
  readonly issues: string[];
  constructor(issues: string[], options?: { cause?: unknown }) {
    super("INVALID_CONFIG", `Invalid shard registry config:\n${list(issues)}`, options);
    this.issues = issues;
  }
}

/** Options of `shardRouting`, `$scatter`, `$scatterPage` or the relay that cannot work (no registry involved). */
export class RoutingOptionsError extends ShardRoutingError<"INVALID_ROUTING_OPTIONS"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("INVALID_ROUTING_OPTIONS", `Invalid options:\n${list(issues)}`);
    this.issues = issues;
  }
}

/** An ID names a shard this registry does not have (and `unknownShard` is `'fail'`). */
export class UnknownShardError extends ShardRoutingError<"UNKNOWN_SHARD"> {
  readonly shard: ShardIdentifier;
  constructor(shard: ShardIdentifier, known: readonly ShardIdentifier[]) {
    const names = known.length > 8 ? `${known.length} shards` : known.map((s) => s.key).join(", ");
    super("UNKNOWN_SHARD", `Shard ${shard.key} is not in the registry (it has ${names})`);
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
    const keys = (shards: ShardIdentifier[]) =>
      shards.length ? shards.map((s) => s.key).join(", ") : "none";
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

/** The result of a staged write was read although its shard's transaction did not commit. */
export class NotCommittedError extends ShardRoutingError<"NOT_COMMITTED"> {
  readonly status: string;
  constructor(description: string, shards: readonly ShardIdentifier[], status: string) {
    super("NOT_COMMITTED", `${description} on shard ${shards.map((s) => s.key).join(", ")} is ${status}`);
    this.status = status;
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

/**
 * A command (`db.$command`) whose shard did not answer: its database is down, unreachable or out of
 * connections, or the command did not finish within its `timeoutMs`. `outcome` says what is known:
 * `"unknown"`, it may have been applied all the same (a late commit, a connection lost at COMMIT),
 * and a retry with the same idempotency key answers what it recorded if it was; `"not-applied"`, it
 * was rolled back: it lost a race, found no transaction slot in time, or was refused by a former
 * owner of a shard that is moving (`@shardkit/ownership`). Counted as unavailable
 * (`isShardUnavailable`): an API answers 503 naming `shard`, with a retry hint.
 */
export class CommandUnavailableError extends ShardRoutingError<"COMMAND_UNAVAILABLE"> {
  readonly shard: ShardIdentifier;
  readonly outcome: "unknown" | "not-applied";
  /** What happened, without the outcome: "shard 0/1 did not answer within 5000 ms", "shard 0/1 is unavailable or busy". */
  readonly reason: string;
  constructor(shard: ShardIdentifier, outcome: "unknown" | "not-applied", cause: unknown) {
    const reason = isAnyShardkitError(cause, "SHARD_TIMEOUT")
      ? cause.message
      : isAnyShardkitError(cause, "STALE_OWNER")
        ? `shard ${shard.key} is moving to another database`
        : `shard ${shard.key} is unavailable or busy`;
    super(
      "COMMAND_UNAVAILABLE",
      outcome === "unknown"
        ? `${reason}: the command may have been applied; send it again with the same idempotency key to learn its outcome`
        : `${reason}: the command was not applied; retry later`,
      { cause },
    );
    this.shard = shard;
    this.outcome = outcome;
    this.reason = reason;
  }
}

/** The same idempotency key came with a different request: refused, nothing decided twice. */
export class IdempotencyConflictError extends ShardRoutingError<"IDEMPOTENCY_CONFLICT"> {
  readonly key: string;
  constructor(key: string) {
    super(
      "IDEMPOTENCY_CONFLICT",
      `Idempotency key ${JSON.stringify(key)} was already used with a different request`,
    );
    this.key = key;
  }
}

/** An outbox event that cannot be written (no topic, an aggregate ID that is not a ShardedUUID). */
export class InvalidEventError extends ShardRoutingError<"INVALID_EVENT"> {
  constructor(message: string) {
    super("INVALID_EVENT", `outbox event: ${message}`);
  }
}

/** The Prisma schema lacks a model a feature needs (the outbox tables of `schema/shardkit.prisma`). */
export class MissingModelError extends ShardRoutingError<"MISSING_MODEL"> {
  readonly model: string;
  constructor(model: string) {
    super(
      "MISSING_MODEL",
      `this client has no ${model} model: add the models of @shardkit/prisma/schema/shardkit.prisma to your schema`,
    );
    this.model = model;
  }
}

/** One server whose connection pools add up to more than it accepts. */
export interface ServerBudget {
  /** How the server was told apart from others (its system identifier, or host:port). */
  server: string;
  maxConnections: number;
  /** Connections reserved for superusers (`superuser_reserved_connections`). */
  reserved: number;
  /** Sum of the pool sizes of every database of the registry on that server. */
  pools: number;
  databases: { name: string; pool: number }[];
}

/** The pools of the registry's databases on one server add up to more than its `max_connections`. */
export class ConnectionBudgetError extends ShardRoutingError<"CONNECTION_BUDGET"> {
  readonly servers: ServerBudget[];
  constructor(servers: ServerBudget[]) {
    super("CONNECTION_BUDGET", `Connection budget exceeded:\n${list(servers.map(describeBudget))}`);
    this.servers = servers;
  }
}

export function describeBudget(s: ServerBudget): string {
  return `server ${s.server}: pools add up to ${s.pools} connections (${s.databases.map((d) => `${d.name}: ${d.pool}`).join(", ")}), but it accepts ${s.maxConnections - s.reserved} (max_connections ${s.maxConnections} - ${s.reserved} reserved); lower each database's pool, raise max_connections, or put a transaction-mode pooler (PgBouncer) in front and mark its URLs \`pooler: true\``;
}

/** A rollout that stopped at a failing target. `report` says what every target did. */
export class SchemaRolloutError extends ShardRoutingError<"ROLLOUT_FAILED"> {
  readonly report: RolloutReport;
  constructor(report: RolloutReport, cause: unknown) {
    const failed = report.targets.find((t) => t.status === "failed");
    super(
      "ROLLOUT_FAILED",
      `Schema rollout failed on ${failed?.name}: ${failed?.error}`,
      cause === undefined ? undefined : { cause },
    );
    this.report = report;
  }
}

/** `rolloutSchema` called without what its mode needs (a schema to push, a migrations folder). */
export class RolloutOptionsError extends ShardRoutingError<"INVALID_ROLLOUT_OPTIONS"> {
  constructor(message: string) {
    super("INVALID_ROLLOUT_OPTIONS", message);
  }
}

/**
 * A rollout waited longer than its `lockTimeoutMs` for the database's rollout lock: another rollout
 * (another service starting, a `shardkit rollout`) holds it. `holder` names it (pid, application_name,
 * since when), as `pg_locks` and `pg_stat_activity` say. Nothing was applied.
 */
export class RolloutLockTimeoutError extends ShardRoutingError<"ROLLOUT_LOCK_TIMEOUT"> {
  readonly timeoutMs: number;
  readonly holder: string;
  constructor(timeoutMs: number, holder: string) {
    super(
      "ROLLOUT_LOCK_TIMEOUT",
      `the database's rollout lock was not free within ${timeoutMs} ms: ${holder}. Another rollout is under way there (nothing was applied): run it again once that one ends, or end it (pg_terminate_backend) if it is stuck`,
    );
    this.timeoutMs = timeoutMs;
    this.holder = holder;
  }
}

/** A shard's database did not answer within a caller's deadline (`withShardDeadline`): a frozen or overloaded server. */
export class ShardTimeoutError extends ShardRoutingError<"SHARD_TIMEOUT"> {
  readonly shard: ShardIdentifier;
  readonly timeoutMs: number;
  constructor(shard: ShardIdentifier, timeoutMs: number) {
    super("SHARD_TIMEOUT", `shard ${shard.key} did not answer within ${timeoutMs} ms`);
    this.shard = shard;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A database did not answer one of shardkit's own statements in time (the outbox relay's
 * `queryTimeoutMs`): a frozen or overloaded server. Its work is retried; the other databases go on.
 */
export class DatabaseTimeoutError extends ShardRoutingError<"DATABASE_TIMEOUT"> {
  /** The database's name (`registry.databases[i].name`). */
  readonly database: string;
  /** The logical shards it holds. */
  readonly shards: readonly ShardIdentifier[];
  readonly timeoutMs: number;
  constructor(database: string, shards: readonly ShardIdentifier[], timeoutMs: number) {
    super("DATABASE_TIMEOUT", `database ${database} (${held(shards)}) did not answer within ${timeoutMs} ms`);
    this.database = database;
    this.shards = shards;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A database could not be reached (its server is down, refused or dropped the connection) while an
 * atomic action ran there, before its commit point: nothing of the action was written anywhere.
 * Counted as unavailable (`isShardUnavailable`); `cause` is the driver's error.
 */
export class DatabaseUnavailableError extends ShardRoutingError<"DATABASE_UNAVAILABLE"> {
  /** The database's name (`registry.databases[i].name`). */
  readonly database: string;
  /** The logical shards it holds. */
  readonly shards: readonly ShardIdentifier[];
  constructor(database: string, shards: readonly ShardIdentifier[], cause: unknown) {
    const reason = cause instanceof Error ? cause.message.split("\n")[0] : String(cause);
    super("DATABASE_UNAVAILABLE", `database ${database} (${held(shards)}) could not be reached: ${reason}`, {
      cause,
    });
    this.database = database;
    this.shards = shards;
  }
}

/**
 * A directory that routes a key (`byDirectory`) did not answer, and no cached entry young enough
 * (`staleMs`) was there to use instead: the requests of that key fail, others go on.
 */
export class DirectoryUnavailableError extends ShardRoutingError<"DIRECTORY_UNAVAILABLE"> {
  readonly directory: string;
  readonly value: string;
  /** Set when the directory did not answer in time (`timeoutMs`), not failed. */
  readonly timeoutMs: number | undefined;
  constructor(directory: string, value: string, cause: unknown, timeoutMs?: number) {
    super(
      "DIRECTORY_UNAVAILABLE",
      `directory ${directory} did not answer for ${JSON.stringify(value)}${timeoutMs === undefined ? "" : ` within ${timeoutMs} ms`}, and no cached entry was young enough to use`,
      { cause },
    );
    this.directory = directory;
    this.value = value;
    this.timeoutMs = timeoutMs;
  }
}

/** A directory that routes a key (`byDirectory`) does not know the key's value: nothing is guessed. */
export class NotInDirectoryError extends ShardRoutingError<"NOT_IN_DIRECTORY"> {
  readonly directory: string;
  readonly value: string;
  constructor(directory: string, value: string) {
    super(
      "NOT_IN_DIRECTORY",
      `directory ${directory} has no shard for ${JSON.stringify(value)}: add it to the directory before writing or reading by it`,
    );
    this.directory = directory;
    this.value = value;
  }
}

/**
 * A value of a field declared unique across shards (`models.X.unique`) is already held by another
 * row: refused before anything is written (the claim rows decide, not each shard's own index).
 */
export class UniqueViolationError extends ShardRoutingError<"UNIQUE_VIOLATION"> {
  readonly model: string;
  readonly field: string;
  /** The canonical value that is taken. */
  readonly value: string;
  constructor(model: string, field: string, value: string) {
    super(
      "UNIQUE_VIOLATION",
      `${model}.${field} ${JSON.stringify(value)} is already taken (unique across shards)`,
    );
    this.model = model;
    this.field = field;
    this.value = value;
  }
}

/**
 * An atomic action (`$action(fn, { atomic: true })`) that cannot run on these databases, refused
 * before anything is written: a database whose server has `max_prepared_transactions = 0` (the
 * default), a deciding database without the `AtomicDecision` table (`schema/atomic.prisma`), or
 * a database reached through a pooler in transaction mode.
 */
export class AtomicUnavailableError extends ShardRoutingError<"ATOMIC_UNAVAILABLE"> {
  /** The databases (their names) and why each cannot take part. */
  readonly databases: { database: string; reason: string }[];
  constructor(databases: { database: string; reason: string }[]) {
    super(
      "ATOMIC_UNAVAILABLE",
      `Atomic actions cannot run here; nothing was written:\n${list(databases.map((d) => `${d.database}: ${d.reason}`))}`,
    );
    this.databases = databases;
  }
}

/**
 * An atomic action that was rolled back everywhere after its participants had prepared: its
 * decision was taken by recovery (its coordinator was slower than the lease), or its deciding
 * database refused. Nothing of it committed.
 */
export class AtomicAbortedError extends ShardRoutingError<"ATOMIC_ABORTED"> {
  /** The action's global id (`AtomicDecision.id`). */
  readonly action: string;
  constructor(action: string, reason: string, options?: { cause?: unknown }) {
    super("ATOMIC_ABORTED", `Atomic action ${action} was rolled back everywhere: ${reason}`, options);
    this.action = action;
  }
}

/**
 * An atomic action whose outcome its coordinator could not learn (the deciding database did not
 * answer its commit): every participant is prepared and the decision is recorded or not on the
 * deciding database. Recovery (`$recoverAtomic`, run by any router) concludes it, all or nothing;
 * until then its rows stay locked. Counted as unavailable (`isShardUnavailable`).
 */
export class AtomicInDoubtError extends ShardRoutingError<"ATOMIC_IN_DOUBT"> {
  readonly action: string;
  readonly shards: ShardIdentifier[];
  constructor(action: string, shards: readonly ShardIdentifier[], options?: { cause?: unknown }) {
    super(
      "ATOMIC_IN_DOUBT",
      `Atomic action ${action} on shards ${shards.map((s) => s.key).join(", ")} is in doubt: its deciding database did not answer; recovery will commit or roll it back everywhere`,
      options,
    );
    this.action = action;
    this.shards = [...shards];
  }
}

/** Which class throws which code. */
export interface PrismaErrorByCode {
  COMMAND_UNAVAILABLE: CommandUnavailableError;
  INVALID_CONFIG: RegistryConfigError;
  INVALID_ROUTING_OPTIONS: RoutingOptionsError;
  UNKNOWN_SHARD: UnknownShardError;
  SHARD_KEY_REQUIRED: ShardKeyRequiredError;
  CROSS_SHARD: CrossShardError;
  PARTIAL_COMMIT: PartialCommitError;
  NOT_COMMITTED: NotCommittedError;
  UNSUPPORTED: UnsupportedShardOperationError;
  SCATTER_REFUSED: ScatterRefusedError;
  IDEMPOTENCY_CONFLICT: IdempotencyConflictError;
  INVALID_EVENT: InvalidEventError;
  MISSING_MODEL: MissingModelError;
  CONNECTION_BUDGET: ConnectionBudgetError;
  ROLLOUT_FAILED: SchemaRolloutError;
  INVALID_ROLLOUT_OPTIONS: RolloutOptionsError;
  ROLLOUT_LOCK_TIMEOUT: RolloutLockTimeoutError;
  SHARD_TIMEOUT: ShardTimeoutError;
  DATABASE_TIMEOUT: DatabaseTimeoutError;
  DATABASE_UNAVAILABLE: DatabaseUnavailableError;
  DIRECTORY_UNAVAILABLE: DirectoryUnavailableError;
  NOT_IN_DIRECTORY: NotInDirectoryError;
  UNIQUE_VIOLATION: UniqueViolationError;
  ATOMIC_UNAVAILABLE: AtomicUnavailableError;
  ATOMIC_ABORTED: AtomicAbortedError;
  ATOMIC_IN_DOUBT: AtomicInDoubtError;
}

/**
 * True for any shardkit error (from this copy of the package or another: it checks a global mark
 * and the code, not the class). With a code of this package it narrows to that code's class:
 * `if (isShardkitError(err, "CROSS_SHARD")) err.shards`.
 */
export const isShardkitError: ShardkitGuard<PrismaErrorByCode> = isAnyShardkitError;

/** A database's shards, as its errors name them (a count past eight). */
function held(shards: readonly ShardIdentifier[]): string {
  return shards.length > 8 ? `${shards.length} shards` : `shards ${shards.map((s) => s.key).join(", ")}`;
}

function list(issues: readonly string[]): string {
  return issues.map((i) => `  - ${i}`).join("\n");
}
