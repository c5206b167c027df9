import { createHash } from "node:crypto";
import { decodeJson, encodeJson } from "./codec.js";
import { IdempotencyConflictError } from "./errors.js";
import { type ShardRef, toShard } from "./registry.js";

type Tx = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};

/** A stable hash of a request: object keys sorted, bigints and Dates kept. */
export function requestHash(request: unknown): string {
  const canonical = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(canonical);
    if (value && typeof value === "object" && !(value instanceof Date)) {
      return Object.fromEntries(
        Object.keys(value)
          .sort()
          .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
      );
    }
    return value;
  };
  return createHash("sha256")
    .update(encodeJson(canonical(request)))
    .digest("hex");
}

/** Which command an idempotency key is for: the shard it decides on, its kind, the client's key. */
export interface IdempotentCommand {
  /** The logical shard the command decides on (the transaction's shard). */
  shard: ShardRef;
  /** The command kind, e.g. "deposit": the same key sent for another kind is a conflict. */
  kind: string;
  /** The client's idempotency key. */
  key: string;
}

export interface IdempotentOptions {
  /**
   * Which errors of `run` are refusals to record (a domain answer such as "insufficient funds"):
   * return what to record (JSON; bigints and Dates kept), or undefined for an error that is not a
   * refusal (it rolls the transaction back and records nothing, so a retry runs again). A recorded
   * refusal is returned as `{ refusal }` now and on every retry with the key, and what `run` changed
   * before refusing is rolled back (a savepoint).
   */
  refusal?(error: unknown): unknown;
}

/** What an idempotent command decided: its result or its refusal, and whether it was recorded earlier. */
export type IdempotentOutcome<R> =
  | { result: R; refusal?: undefined; replayed: boolean }
  | { result?: undefined; refusal: unknown; replayed: boolean };

/**
 * Runs a command once per idempotency key, inside the shard transaction `tx` (from
 * `$transactionOn` or `unit.on`) on `command.shard`. The first call runs `run` and records its
 * outcome with the state it changed. A retry with the same key, kind and request returns the
 * recorded outcome without running again. The same key with another kind or another request throws
 * `IdempotencyConflictError`. Concurrent calls with one key serialize on the key's row: the second
 * waits, then returns the first's outcome.
 *
 * What is detected: a key reused on the same logical shard (for another request or another kind
 * of command). What is not: the same key sent for a command on another shard. Keys are recorded per
 * logical shard, so they move with it.
 */
export async function idempotent<R>(
  tx: unknown,
  command: IdempotentCommand,
  request: unknown,
  run: () => Promise<R>,
  options: IdempotentOptions = {},
): Promise<IdempotentOutcome<R>> {
  const db = tx as Tx;
  const shard = toShard(command.shard).bits;
  const hash = requestHash(request);
  const inserted = await db.$executeRawUnsafe(
    `INSERT INTO "IdempotencyKey" (shard, key, kind, "requestHash") VALUES ($1, $2, $3, $4) ON CONFLICT (shard, key) DO NOTHING`,
    shard,
    command.key,
    command.kind,
    hash,
  );
  if (inserted === 0) {
    const [row] = await db.$queryRawUnsafe<{ kind: string; requestHash: string; response: string | null }[]>(
      `SELECT kind, "requestHash", response FROM "IdempotencyKey" WHERE shard = $1 AND key = $2 FOR UPDATE`,
      shard,
      command.key,
    );
    if (!row || row.kind !== command.kind || row.requestHash !== hash || row.response === null) {
      throw new IdempotencyConflictError(command.key);
    }
    const recorded = decodeJson<{ result?: R; refusal?: unknown }>(row.response);
    return "refusal" in recorded
      ? { refusal: recorded.refusal, replayed: true }
      : { result: recorded.result as R, replayed: true };
  }
  const record = (outcome: object) =>
    db.$executeRawUnsafe(
      `UPDATE "IdempotencyKey" SET response = $3 WHERE shard = $1 AND key = $2`,
      shard,
      command.key,
      encodeJson(outcome),
    );
  if (!options.refusal) {
    const result = await run();
    await record({ result: result ?? null });
    return { result, replayed: false };
  }
  await db.$executeRawUnsafe("SAVEPOINT shardkit_idempotent");
  let result: R;
  try {
    result = await run();
  } catch (error) {
    const refusal = options.refusal(error);
    if (refusal === undefined) throw error;
    await db.$executeRawUnsafe("ROLLBACK TO SAVEPOINT shardkit_idempotent");
    await record({ refusal });
    return { refusal, replayed: false };
  }
  await db.$executeRawUnsafe("RELEASE SAVEPOINT shardkit_idempotent");
  await record({ result: result ?? null });
  return { result, replayed: false };
}

/**
 * Consumer idempotency: records that `consumer` applied event `eventId`, inside the consumer's
 * shard transaction `tx` on `shard` (the transaction's shard, or an ID on it), under which the
 * record is kept, so it moves with the shard. True the first time; false for a redelivery (apply
 * nothing then).
 */
export async function consumeOnce(
  tx: unknown,
  shard: ShardRef,
  consumer: string,
  eventId: string,
): Promise<boolean> {
  const inserted = await (tx as Tx).$executeRawUnsafe(
    `INSERT INTO "ProcessedEvent" (shard, consumer, "eventId") VALUES ($1, $2, $3::uuid) ON CONFLICT DO NOTHING`,
    toShard(shard).bits,
    consumer,
    eventId,
  );
  return inserted === 1;
}
