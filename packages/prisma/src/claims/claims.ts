import { randomUUID } from "node:crypto";
import { murmur3, ShardIdentifier } from "@shardkit/id";
import { withShardDeadline } from "../deadline.js";
import { UniqueViolationError } from "../errors.js";
import type { ShardLayout } from "../planner.js";
import type { Call } from "../scope.js";
import { LOCKS } from "../shared.js";
import { isShardUnavailable, isTransientTransactionError } from "../unavailable.js";
import type { Claim, ClaimRecord, UniqueSpec } from "../unique.js";

/**
 * Claim rows: global uniqueness of a field over every shard. A value's claim lives on the shard its
 * canonical form hashes to and names the row that holds it (its shard and id) and the write that
 * took it (a random token).
 *
 * A write that takes a value is a saga: (1) claim it, with a new token; (2) in the row's shard
 * transaction, take the value's advisory lock, record the token on the row's database (table
 * `UniqueClaimToken`) unless it is void there, write the row; (3) mark the claim held. A claim whose
 * row does not hold the value (a crash before step 2 committed, a deleted row, a changed value) is
 * void, and it is found so only under the same advisory lock on the row's database, so a row that is
 * being written is never taken for absent: `settle` decides, whoever calls it (the next claimant of
 * the value, a failed write, `repairClaims`). It marks the token void there before the claim is
 * deleted or given to another write, so the write still holding the token is refused at step 2.
 *
 * Each step needs one database at a time: step 2 reads only the row's database, and `settle`
 * commits its decision there before it changes the claim. No step holds a lock or a transaction on
 * one database while it waits for a connection to another (where claims and rows cross databases,
 * small pools would otherwise starve each other).
 */

export const TABLE = '"UniqueClaim"';
export const TOKENS = '"UniqueClaimToken"';

/** The database clients of a routed client, and how to run a model call on one. */
export interface ClaimContext {
  clients: readonly object[];
  layout: ShardLayout;
  call: Call;
  /** How long one claim statement (or `settle`'s transaction, beyond its own bounds) may wait. */
  timeoutMs: number;
  /** `run()`, a statement on database `database`, failing with `DatabaseTimeoutError` after `timeoutMs`. */
  bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T>;
  /** The spec of a unique field by scope (`Model.field`), with its model's id field. */
  spec(scope: string): { unique: UniqueSpec; idField: string } | undefined;
}

export type Raw = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};
type Interactive = { $transaction<R>(fn: (tx: object) => Promise<R>, options?: object): Promise<R> };

/** A claim as `settle` needs it: where it lives, the row it names and the write that took it. */
export interface ClaimOwner {
  /** The logical shard (bits) the claim lives on. */
  shard: number;
  scope: string;
  value: string;
  ownerShard: number;
  ownerId: string;
  token: string;
}

/** A claim taken at step 1, with its write's token. */
export interface TakenClaim extends Claim {
  token: string;
}

/**
 * The client of `shard`'s database, every statement bounded: `ShardTimeoutError` once
 * `context.timeoutMs` pass (a transaction gets its own waits on top), never a claim that hangs.
 */
function clientOf(context: ClaimContext, shard: ShardIdentifier): Raw & Interactive {
  const { layout, timeoutMs } = context;
  const client = context.clients[layout.databaseOf(layout.resolve(shard)).index] as Raw & Interactive;
  return {
    $queryRawUnsafe: (sql, ...values) =>
      withShardDeadline(shard, timeoutMs, () => client.$queryRawUnsafe(sql, ...values)),
    $executeRawUnsafe: (sql, ...values) =>
      withShardDeadline(shard, timeoutMs, () => client.$executeRawUnsafe(sql, ...values)),
    $transaction: (fn, options?: { maxWait?: number; timeout?: number }) =>
      withShardDeadline(shard, timeoutMs + (options?.maxWait ?? 2000) + (options?.timeout ?? 5000), () =>
        client.$transaction(fn, options),
      ),
  };
}

/**
 * The options of `settle`'s transaction, which takes a value's lock and then reads the row: READ
 * COMMITTED whatever the database's default, so each statement after the lock sees what committed
 * before it was granted (under REPEATABLE READ the snapshot would date from before the wait). Many
 * claimants of one value queue for its lock, each holding a connection while it waits, so the waits
 * for a connection and for the lock get longer bounds than Prisma's defaults (2 s and 5 s): on a
 * busy host a queue is slow, not absent.
 */
const UNDER_LOCK = { isolationLevel: "ReadCommitted", maxWait: 20_000, timeout: 20_000 } as const;

/** A claim statement that lost a race to a concurrent one (see `raced`): read the claim again. */
const RACED = -1;

/**
 * One statement on a claim row, outside any transaction. On a database whose default isolation is
 * REPEATABLE READ or SERIALIZABLE, a statement that meets a claim row another statement changed
 * after it began fails with a serialization error instead of seeing the change: that is a race
 * lost, as a conflict or a changed token is under READ COMMITTED, and the caller reads the claim
 * again (`RACED`).
 */
async function raced(run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (error) {
    // A serialization failure or a deadlock; not a database out of connections (that is unavailable).
    if (isTransientTransactionError(error) && !isShardUnavailable(error)) return RACED;
    throw error;
  }
}

/** The advisory lock of a claim: the frozen hash of `scope NUL value`, as a signed 32-bit key. */
function lockKey(scope: string, value: string): number {
  return murmur3(`${scope}\u0000${value}`) | 0;
}

/** The claim of a value, or null. */
export async function readClaim(
  context: ClaimContext,
  key: { scope: string; value: string; shard: ShardIdentifier },
): Promise<ClaimRecord | null> {
  const rows = await clientOf(context, key.shard).$queryRawUnsafe<ClaimRecord[]>(
    `SELECT "ownerShard", "ownerId", "stored", "state", "token" FROM ${TABLE} WHERE "scope" = $1 AND "value" = $2`,
    key.scope,
    key.value,
  );
  return rows[0] ?? null;
}

/**
 * Step 1: claims every value for its row (sorted, so two writes never wait on each other in
 * opposite orders), each with a new token. A value held by a live row throws
 * `UniqueViolationError`; a void claim is taken over. One statement at a time, on the claim's database.
 */
export async function takeClaims(context: ClaimContext, claims: readonly Claim[]): Promise<TakenClaim[]> {
  const taken: TakenClaim[] = [];
  for (const claim of sorted(claims)) taken.push(await take(context, { ...claim, token: randomUUID() }));
  return taken;
}

async function take(context: ClaimContext, claim: TakenClaim): Promise<TakenClaim> {
  const client = clientOf(context, claim.shard);
  for (let attempt = 0; attempt < 8; attempt++) {
    const inserted = await raced(() =>
      client.$executeRawUnsafe(
        `INSERT INTO ${TABLE} ("shard", "scope", "value", "stored", "ownerShard", "ownerId", "state", "token") VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7) ON CONFLICT ("scope", "value") DO NOTHING`,
        claim.shard.bits,
        claim.scope,
        claim.value,
        claim.stored,
        claim.ownerShard.bits,
        claim.ownerId,
        claim.token,
      ),
    );
    if (inserted === RACED) continue;
    if (inserted === 1) return claim;
    const existing = await readClaim(context, claim);
    if (!existing) continue;
    if (existing.ownerId === claim.ownerId && existing.ownerShard === claim.ownerShard.bits) {
      // Already this row's (a retry, or the row set to its own value again): the claim passes to
      // this write's token, pending again, under its shard (a claim an earlier release placed on
      // another shard of this database is labelled anew, so it moves with the right shard). The
      // token it had is voided first (a write of this row still holding it may not have reached its
      // row yet; it is refused there, as if taken over).
      await voidToken(context, {
        ...existing,
        shard: claim.shard.bits,
        scope: claim.scope,
        value: claim.value,
      });
      const n = await raced(() =>
        client.$executeRawUnsafe(
          `UPDATE ${TABLE} SET "stored" = $4, "token" = $5, "state" = 'pending', "createdAt" = now(), "shard" = $6 WHERE "scope" = $1 AND "value" = $2 AND "token" = $3`,
          claim.scope,
          claim.value,
          existing.token,
          claim.stored,
          claim.token,
          claim.shard.bits,
        ),
      );
      if (n === 1) return claim;
      continue;
    }
    const outcome = await settle(
      context,
      { ...existing, shard: claim.shard.bits, scope: claim.scope, value: claim.value },
      claim,
    );
    if (outcome === "held") throw new UniqueViolationError(claim.model, claim.field, claim.value);
    if (outcome === "taken") return claim;
  }
  throw new UniqueViolationError(claim.model, claim.field, claim.value);
}

/**
 * Step 2, inside the row's transaction `tx` (the saga's own, or a caller's of any isolation): the
 * values' advisory locks, then each token is recorded on the row's database unless a `settle` has
 * voided it there (the claim was taken over or released meanwhile): then `UniqueViolationError`.
 * Reads and writes only through `tx`. Under REPEATABLE READ or SERIALIZABLE a token voided after the
 * transaction's snapshot fails the upsert with a serialization error, never passes unseen.
 */
export async function checkClaims(tx: object, claims: readonly TakenClaim[]): Promise<void> {
  const ordered = sorted(claims);
  for (const claim of ordered) {
    await (tx as Raw).$queryRawUnsafe(
      "SELECT pg_advisory_xact_lock($1::int, $2::int)::text",
      LOCKS.claims,
      lockKey(claim.scope, claim.value),
    );
  }
  for (const claim of ordered) {
    const [row] = await (tx as Raw).$queryRawUnsafe<{ void: boolean }[]>(
      `INSERT INTO ${TOKENS} ("token", "shard", "void") VALUES ($1, $2, false) ON CONFLICT ("token") DO UPDATE SET "void" = ${TOKENS}."void" RETURNING "void"`,
      claim.token,
      claim.ownerShard.bits,
    );
    if (row!.void) throw new UniqueViolationError(claim.model, claim.field, claim.value);
  }
}

/** Step 3: the row was written; its claims are held. */
export async function holdClaims(context: ClaimContext, claims: readonly TakenClaim[]): Promise<void> {
  for (const claim of claims) {
    // A race lost here is a settle that found the row and marked the claim held itself.
    await raced(() =>
      clientOf(context, claim.shard).$executeRawUnsafe(
        `UPDATE ${TABLE} SET "state" = 'held' WHERE "scope" = $1 AND "value" = $2 AND "token" = $3`,
        claim.scope,
        claim.value,
        claim.token,
      ),
    );
  }
}

/** After a failed write: each claim is settled (held if its row holds the value after all, else released). */
export async function releaseClaims(context: ClaimContext, claims: readonly TakenClaim[]): Promise<void> {
  for (const claim of claims) {
    await settle(context, {
      shard: claim.shard.bits,
      scope: claim.scope,
      value: claim.value,
      ownerShard: claim.ownerShard.bits,
      ownerId: claim.ownerId,
      token: claim.token,
    });
  }
}

/**
 * Decides a claim under the value's advisory lock on its row's database: the row holds the value
 * (`held`: the claim is marked held), or it does not, and the claim's token is marked void there;
 * once that has committed, the claim is deleted (`released`) or, with `successor`, given to it
 * (`taken`), only if it still carries that token. `changed`: it did not (someone else decided).
 * The transaction on the row's database ends before the claim's database is written.
 */
export async function settle(
  context: ClaimContext,
  claim: ClaimOwner,
  successor?: TakenClaim,
): Promise<"held" | "released" | "taken" | "changed"> {
  const spec = context.spec(claim.scope);
  const live = await voidToken(context, claim, async (tx) => {
    if (!spec) return false;
    const { unique, idField } = spec;
    const row = (await context.call(tx, unique.model, "findUnique", {
      where: { [idField]: claim.ownerId },
      select: { [unique.field]: true },
    })) as Record<string, unknown> | null;
    const stored = row?.[unique.field];
    return typeof stored === "string" && unique.canonical(stored) === claim.value;
  });
  const claims = clientOf(context, ShardIdentifier.fromBits(claim.shard));
  const same = `"scope" = $1 AND "value" = $2 AND "token" = $3`;
  const args = [claim.scope, claim.value, claim.token];
  if (live) {
    // The row holds the value: held, whether this marks it or a concurrent settle did.
    await raced(() =>
      claims.$executeRawUnsafe(`UPDATE ${TABLE} SET "state" = 'held' WHERE ${same}`, ...args),
    );
    return "held";
  }
  if (!successor) {
    const n = await raced(() => claims.$executeRawUnsafe(`DELETE FROM ${TABLE} WHERE ${same}`, ...args));
    return n === 1 ? "released" : "changed";
  }
  const n = await raced(() =>
    claims.$executeRawUnsafe(
      `UPDATE ${TABLE} SET "ownerShard" = $4, "ownerId" = $5, "stored" = $6, "token" = $7, "state" = 'pending', "createdAt" = now() WHERE ${same}`,
      ...args,
      successor.ownerShard.bits,
      successor.ownerId,
      successor.stored,
      successor.token,
    ),
  );
  return n === 1 ? "taken" : "changed";
}

/**
 * Marks a claim's token void on its row's database, under the value's advisory lock, unless
 * `live(tx)` (read under the lock) says the row holds the value; true then. Commits before it
 * returns: the claim's own database is written only afterwards, never while this lock is held.
 * The token "" (claims written before tokens; no write holds it) is never marked.
 */
async function voidToken(
  context: ClaimContext,
  claim: ClaimOwner,
  live: (tx: object) => Promise<boolean> = async () => false,
): Promise<boolean> {
  return clientOf(context, ShardIdentifier.fromBits(claim.ownerShard)).$transaction(async (tx) => {
    await (tx as Raw).$queryRawUnsafe(
      "SELECT pg_advisory_xact_lock($1::int, $2::int)::text",
      LOCKS.claims,
      lockKey(claim.scope, claim.value),
    );
    if (await live(tx)) return true;
    if (claim.token !== "") {
      await (tx as Raw).$executeRawUnsafe(
        `INSERT INTO ${TOKENS} ("token", "shard", "void") VALUES ($1, $2, true) ON CONFLICT ("token") DO UPDATE SET "void" = true`,
        claim.token,
        claim.ownerShard,
      );
    }
    return false;
  }, UNDER_LOCK);
}

function sorted<C extends Claim>(claims: readonly C[]): C[] {
  return [...claims].sort((a, b) =>
    a.scope === b.scope ? (a.value < b.value ? -1 : a.value > b.value ? 1 : 0) : a.scope < b.scope ? -1 : 1,
  );
}
