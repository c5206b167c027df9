import { createHash } from "node:crypto";
import { decodeJson, encodeJson } from "./codec.js";
import { IdempotencyConflictError } from "./errors.js";

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

/**
 * Runs a command once per idempotency key, inside a shard transaction `tx` (from
 * `$transactionOn` or `unit.on`). The first call runs `run` and records its result with the state
 * it changed; a retry with the same key and request returns the recorded result without running
 * again; the same key with another request throws `IdempotencyConflictError`. Concurrent calls
 * with one key serialize on the key's row: the second waits, then returns the first's result.
 */
export async function idempotent<R>(
  tx: unknown,
  key: string,
  request: unknown,
  run: () => Promise<R>,
): Promise<{ result: R; replayed: boolean }> {
  const db = tx as Tx;
  const hash = requestHash(request);
  const inserted = await db.$executeRawUnsafe(
    `INSERT INTO "IdempotencyKey" (key, "requestHash") VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
    key,
    hash,
  );
  if (inserted === 0) {
    const [row] = await db.$queryRawUnsafe<{ requestHash: string; response: string | null }[]>(
      `SELECT "requestHash", response FROM "IdempotencyKey" WHERE key = $1 FOR UPDATE`,
      key,
    );
    if (!row || row.requestHash !== hash) throw new IdempotencyConflictError(key);
    if (row.response === null) throw new IdempotencyConflictError(key);
    return { result: decodeJson<R>(row.response), replayed: true };
  }
  const result = await run();
  await db.$executeRawUnsafe(
    `UPDATE "IdempotencyKey" SET response = $2 WHERE key = $1`,
    key,
    encodeJson(result ?? null),
  );
  return { result, replayed: false };
}

/**
 * Consumer idempotency: records that `consumer` applied event `eventId`, inside the consumer's
 * shard transaction `tx`. True the first time; false for a redelivery (apply nothing then).
 */
export async function consumeOnce(tx: unknown, consumer: string, eventId: string): Promise<boolean> {
  const inserted = await (tx as Tx).$executeRawUnsafe(
    `INSERT INTO "ProcessedEvent" (consumer, "eventId") VALUES ($1, $2::uuid) ON CONFLICT DO NOTHING`,
    consumer,
    eventId,
  );
  return inserted === 1;
}
