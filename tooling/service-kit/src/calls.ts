// A service's calls to its shards: commands once per Idempotency-Key (`$command`), and reads bounded
// by a deadline, each failure to answer said in the service's terms (503 SHARD_UNAVAILABLE naming
// the shard), each refusal thrown as the service's own error.
import { isShardkitError, type ShardIdentifier } from "@shardkit/id";
import {
  type CommandOptions,
  type IdempotentOutcome,
  isShardUnavailable,
  isTransientTransactionError,
  type ShardRef,
  withShardDeadline,
} from "@shardkit/prisma";
import { shardOfId } from "@shardkit/prisma/fastify";

/** Shard transactions run again up to 4 times when they lose a race, and wait up to 5 s for a slot. */
export const TRANSACTION = { retries: 4, maxWait: 5000 } as const;

/** What each mutating call returns: the result, and whether it is a recorded one (a retry). */
export interface Outcome<T> {
  result: T;
  /** A recorded result returned again for a retried Idempotency-Key. */
  replayed: boolean;
}

/** A service's error class (`serviceErrors`): the codes its shard calls answer with, and its refusals. */
export interface ShardCallErrors {
  new (
    code: "SHARD_UNAVAILABLE" | "VALIDATION" | "NOT_FOUND",
    message: string,
    body?: Record<string, unknown>,
    options?: { cause?: unknown },
  ): Error;
  refusalOf(error: unknown): unknown;
  fromRefusal(refusal: unknown): Error;
}

export interface ShardCallsOptions<Tx> {
  /** The routed client (its `$command`, typed by the service's transaction client `Tx`). */
  db: {
    $command<R>(
      shard: ShardRef,
      options: CommandOptions,
      fn: (tx: Tx) => Promise<R>,
    ): Promise<IdempotentOutcome<R>>;
  };
  registry: { resolve(shard: ShardRef): ShardIdentifier };
  errors: ShardCallErrors;
  /** How long a call waits for its shard's database before answering 503 (ms; default 5 s). */
  deadlineMs?: number | undefined;
}

/** The calls a service makes to its shards, with its errors and its deadline (`ShardCallsOptions`). */
export function shardCalls<Tx>({ db, registry, errors, deadlineMs = 5000 }: ShardCallsOptions<Tx>) {
  return {
    /** How long a call waits for its shard's database before answering 503 (ms). */
    deadlineMs,

    /** The shard an ID names, refusing malformed IDs (400) and shards this deployment does not have (404). */
    shardOf(id: string, what: string): ShardIdentifier {
      return shardOfId(registry, id, what, errors);
    },

    /**
     * A command, once per Idempotency-Key (`$command`): one transaction on `shard` that records its
     * outcome with the state it changed. A refusal (a 4xx of the service's errors) is recorded too
     * and answered again to every retry with the key; the same key for another kind of command or
     * another request is IdempotencyConflictError (409 IDEMPOTENCY_CONFLICT). A shard that does not
     * answer within the deadline (down, frozen, moving) is CommandUnavailableError, which the HTTP API
     * answers 503 SHARD_UNAVAILABLE saying when the command may have been applied (`shardkitHttp`).
     */
    async command<R>(
      shard: ShardRef,
      kind: string,
      key: string,
      request: unknown,
      run: (tx: Tx) => Promise<R>,
    ): Promise<Outcome<R>> {
      const refusal = errors.refusalOf;
      const options = { kind, key, request, refusal, timeoutMs: deadlineMs, ...TRANSACTION };
      const outcome = await db.$command(shard, options, run);
      if (outcome.refusal !== undefined) throw errors.fromRefusal(outcome.refusal);
      return { result: outcome.result as R, replayed: outcome.replayed };
    },

    /**
     * Runs `run` (a read, a transaction of its own) against one shard; a database that cannot be
     * reached, is busy, or does not answer within the deadline (its server frozen) becomes 503
     * SHARD_UNAVAILABLE naming the shard, with the database's error as its cause.
     */
    async onShard<R>(shardOrId: ShardRef, run: () => Promise<R>): Promise<R> {
      const shard = registry.resolve(shardOrId);
      try {
        return await withShardDeadline(shard, deadlineMs, run);
      } catch (error) {
        if (!isShardUnavailable(error) && !isTransientTransactionError(error)) throw error;
        const message = isShardkitError(error, "SHARD_TIMEOUT")
          ? error.message
          : `shard ${shard.key} is unavailable or busy`;
        throw new errors(
          "SHARD_UNAVAILABLE",
          `${message}; retry later`,
          { shard: shard.key },
          { cause: error },
        );
      }
    },
  };
}
