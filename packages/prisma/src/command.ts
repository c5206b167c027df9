import { isShardkitError, type ShardIdentifier } from "@shardkit/id";
import { withShardDeadline } from "./deadline.js";
import { CommandUnavailableError } from "./errors.js";
import { type IdempotentOptions, type IdempotentOutcome, idempotent } from "./idempotency.js";
import type { TransactionOptions } from "./transaction.js";
import { isShardUnavailable, isTransientTransactionError } from "./unavailable.js";

/** Options of `db.$command`: the command's identity, and its transaction's options. */
export interface CommandOptions extends TransactionOptions, IdempotentOptions {
  /** What the command does ("transfer"): a key sent with another kind of command is refused. */
  kind: string;
  /** The caller's idempotency key (an `Idempotency-Key` header), per logical shard. */
  key: string;
  /** The request as its caller sent it: the same key with another request is refused. */
  request: unknown;
  /**
   * How long the command may take, its wait for a connection and a transaction slot included (ms):
   * after that it fails with `CommandUnavailableError` (outcome `"unknown"`: it cannot be
   * cancelled, and may still commit). Default: no deadline of its own (Prisma's `maxWait` and
   * `timeout` bound the transaction, not a server that stops answering).
   */
  timeoutMs?: number | undefined;
}

/**
 * Runs a command once per idempotency key in one transaction on `shard` (`transaction` opens it):
 * `fn`'s result, or the refusal `options.refusal` records, is recorded with the state it changed and
 * answered again to every retry with the key. A key already used for another kind of command or
 * another request throws `IdempotencyConflictError`. A shard that does not answer (down, out of
 * connections, past `timeoutMs`, or losing races past `retries`) throws `CommandUnavailableError`
 * saying whether the command may have been applied.
 */
export async function runCommand<R>(
  shard: ShardIdentifier,
  options: CommandOptions,
  transaction: (body: (tx: object) => Promise<IdempotentOutcome<R>>) => Promise<IdempotentOutcome<R>>,
  fn: (tx: object) => Promise<R>,
): Promise<IdempotentOutcome<R>> {
  const { kind, key, request, refusal, timeoutMs } = options;
  // Once its caller has been answered (the deadline passed), no new attempt of the command starts:
  // one that has not begun when the deadline fires, or a retry after a lost race, rolls back at
  // once. Only an attempt already running may still commit.
  let abandoned = false;
  const run = () =>
    transaction((tx) => {
      // Rejected (so rolled back) before anything runs; nobody waits for this answer any more.
      if (abandoned) return Promise.reject(new CommandUnavailableError(shard, "not-applied", undefined));
      return idempotent(tx, { shard, kind, key }, request, () => fn(tx), refusal ? { refusal } : {});
    });
  try {
    return await (timeoutMs === undefined ? run() : withShardDeadline(shard, timeoutMs, run));
  } catch (error) {
    // Past the deadline: may still commit. Refused by a former owner (@shardkit/ownership's fence,
    // inside the transaction, or its router before it) or lost a race (a deadlock, no slot in time):
    // rolled back. Any other failure to answer may have come after the commit (a late commit, a
    // connection lost at COMMIT).
    const late = isShardkitError(error, "SHARD_TIMEOUT");
    if (late) abandoned = true;
    const rolledBack = !late && (isTransientTransactionError(error) || isShardkitError(error, "STALE_OWNER"));
    if (!rolledBack && !isShardUnavailable(error)) throw error;
    throw new CommandUnavailableError(shard, rolledBack ? "not-applied" : "unknown", error);
  }
}
