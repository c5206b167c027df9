// A call at the shard's owner: admitted first, and an answer that found nothing confirmed with the
// database that gave it (a former owner refuses instead of answering "not found").
import { WRITES } from "./operations.js";
import type { OwnershipHook } from "./ownership.js";
import type { Placed } from "./place.js";

/**
 * Runs a call with a partition map attached, placed by `place` where its shards are now. On one
 * database, its shards are admitted first (a shard whose records are in doubt is refused), and an
 * answer that found nothing (null, an empty list, a count of zero, Prisma's P2025) is confirmed
 * with the database: a database that no longer owns the shard refuses instead, so a former owner
 * never answers "not found" for rows that live at the owner. A call over several shards of one
 * database is always confirmed (a shard that moved away would be missing from a non-empty answer).
 * Over several databases it runs as it is.
 */
export async function runOwned(
  hook: OwnershipHook,
  statements: { bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T> },
  clients: readonly object[],
  place: () => Placed,
  operation: string,
  run: (placed: Placed) => PromiseLike<unknown>,
): Promise<unknown> {
  const placed = place();
  if (placed.shape !== "shard" && placed.shape !== "database") return run(placed);
  const { database, shards } = placed.targets[0]!;
  const write = { write: WRITES.has(operation) };
  for (const shard of shards) {
    const pending = hook.admit?.(shard, write);
    if (pending) {
      // Held in the router (its shard was between owners) or checked again: placed anew, where
      // the shard is now, and admitted there.
      await pending;
      return runOwned(hook, statements, clients, place, operation, run);
    }
  }
  const client = clients[database]!;
  const confirm = hook.confirm;
  let result: unknown;
  try {
    result = await run(placed);
  } catch (error) {
    if (confirm && isNotFound(error))
      await Promise.all(shards.map((s) => statements.bounded(database, () => confirm(client, s))));
    throw error;
  }
  if (confirm && (shards.length > 1 || isEmptyAnswer(result, operation)))
    await Promise.all(shards.map((s) => statements.bounded(database, () => confirm(client, s))));
  return result;
}

/**
 * An answer of `operation` that found nothing: null, an empty list, a batch's `{ count: 0 }`; for
 * `count` and `aggregate`, figures that are all zero or null (`0`, `{ _all: 0 }`, `{ _count: 0,
 * _sum: { x: null } }`).
 */
export function isEmptyAnswer(result: unknown, operation: string): boolean {
  if (result === null || result === undefined) return true;
  if (Array.isArray(result)) return result.length === 0;
  if (operation === "count" || operation === "aggregate") return nothingCounted(result);
  if (typeof result !== "object") return false;
  const { count } = result as { count?: unknown };
  return count === 0 && Object.keys(result).length === 1;
}

/** Whether every figure of an aggregate is zero or null (nested objects included). */
function nothingCounted(value: unknown): boolean {
  if (value === null || value === undefined || value === 0) return true;
  if (typeof value === "bigint") return value === 0n;
  if (typeof value !== "object") return false;
  if (Array.isArray(value) || value instanceof Date) return false;
  return Object.values(value).every(nothingCounted);
}

/** Prisma's "not found" (P2025): an update, delete or `...OrThrow` read that matched no row. */
export function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "P2025";
}
