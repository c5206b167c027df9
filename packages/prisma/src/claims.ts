import { ShardIdentifier } from "@shardkit/id";
import { UniqueViolationError } from "./errors.js";
import type { Call } from "./executor.js";
import type { Placement } from "./planner.js";
import { hashString } from "./strategies.js";
import type { Claim, ClaimRecord, UniqueSpec } from "./unique.js";

/**
 * Claim rows: global uniqueness of a field over every shard. A value's claim lives on the shard its
 * canonical form hashes to and names the row that holds it (its shard and id).
 *
 * A write that takes a value is a saga: (1) claim it; (2) in the row's shard transaction, take the
 * value's advisory lock, check that the claim is still the row's, write the row; (3) mark the claim
 * held. A row is never written without its claim (step 2 checks it in the row's transaction). A
 * claim whose row does not hold the value (a crash before step 2 committed, a deleted row, a changed
 * value) is void, and it is found so only under the same advisory lock on the row's database, so a
 * row that is being written is never taken for absent: `settle` decides, whoever calls it (the next
 * claimant of the value, a failed write, `repairClaims`).
 */

/** The advisory lock class of claims (the second key is the value's hash). */
const CLAIM_LOCK = 7303;
const TABLE = '"UniqueClaim"';

/** The database clients of a routed client, and how to run a model call on one. */
export interface ClaimContext {
  clients: readonly object[];
  placement: Placement;
  call: Call;
  /** The spec of a unique field by scope (`Model.field`), with its model's id field. */
  spec(scope: string): { unique: UniqueSpec; idField: string } | undefined;
}

type Raw = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};
type Interactive = { $transaction<R>(fn: (tx: object) => Promise<R>, options?: object): Promise<R> };

/** A claim as `settle` needs it: where it lives and the row it names. */
export interface ClaimOwner {
  /** The logical shard (bits) the claim lives on. */
  shard: number;
  scope: string;
  value: string;
  ownerShard: number;
  ownerId: string;
}

/** What `repairClaims` did. */
export interface ClaimRepairReport {
  /** Pending claims whose row holds the value: now held. */
  held: number;
  /** Claims whose row does not hold the value: deleted. */
  released: number;
  /** Databases that could not be read, with their error. */
  failed: { database: number; error: unknown }[];
}

function clientOf(context: ClaimContext, shard: ShardIdentifier): Raw & Interactive {
  const { placement } = context;
  return context.clients[placement.physicalOf(placement.resolve(shard)).index] as Raw & Interactive;
}

/**
 * The options of `settle`'s transaction, which takes a value's lock and then reads the row: READ
 * COMMITTED whatever the database's default, so each statement after the lock sees what committed
 * before it was granted (under REPEATABLE READ the snapshot would date from before the wait).
 */
const UNDER_LOCK = { isolationLevel: "ReadCommitted" } as const;

/**
 * How a claim is read or written while `tx`, on the row's database, holds the value's lock: through
 * `tx` when the claim is on that database too and `tx` is READ COMMITTED (so it reads what
 * committed before the lock was granted). The lock holder must never wait for a second connection
 * of a pool whose connections may all be waiting for that lock (a pool of one connection, or many
 * claimants of one value, would deadlock until a transaction timed out). Otherwise (another
 * database, or `tx` under REPEATABLE READ or SERIALIZABLE, whose snapshot may predate the claim),
 * through the claim's database's pool.
 */
function underLock(
  context: ClaimContext,
  claimShard: ShardIdentifier,
  rowShard: ShardIdentifier,
  tx: object,
  readCommitted: boolean,
): Raw {
  const claims = clientOf(context, claimShard);
  return readCommitted && claims === clientOf(context, rowShard) ? (tx as Raw) : claims;
}

function lockKey(scope: string, value: string): number {
  return hashString(`${scope}\u0000${value}`) | 0;
}

/** The claim of a value, or null. */
export async function readClaim(
  context: ClaimContext,
  key: { scope: string; value: string; shard: ShardIdentifier },
  through: Raw = clientOf(context, key.shard),
): Promise<ClaimRecord | null> {
  const rows = await through.$queryRawUnsafe<ClaimRecord[]>(
    `SELECT "ownerShard", "ownerId", "stored", "state" FROM ${TABLE} WHERE "scope" = $1 AND "value" = $2`,
    key.scope,
    key.value,
  );
  return rows[0] ?? null;
}

/**
 * Step 1: claims every value for its row (sorted, so two writes never wait on each other in
 * opposite orders). A value held by a live row throws `UniqueViolationError`; a void claim is taken over.
 */
export async function takeClaims(context: ClaimContext, claims: readonly Claim[]): Promise<void> {
  for (const claim of sorted(claims)) await take(context, claim);
}

async function take(context: ClaimContext, claim: Claim): Promise<void> {
  const client = clientOf(context, claim.shard);
  for (let attempt = 0; attempt < 8; attempt++) {
    const inserted = await client.$executeRawUnsafe(
      `INSERT INTO ${TABLE} ("shard", "scope", "value", "stored", "ownerShard", "ownerId", "state") VALUES ($1, $2, $3, $4, $5, $6, 'pending') ON CONFLICT ("scope", "value") DO NOTHING`,
      claim.shard.bits,
      claim.scope,
      claim.value,
      claim.stored,
      claim.ownerShard.bits,
      claim.ownerId,
    );
    if (inserted === 1) return;
    const existing = await readClaim(context, claim);
    if (!existing) continue;
    if (existing.ownerId === claim.ownerId && existing.ownerShard === claim.ownerShard.bits) {
      if (existing.stored !== claim.stored) {
        await client.$executeRawUnsafe(
          `UPDATE ${TABLE} SET "stored" = $3 WHERE "scope" = $1 AND "value" = $2`,
          claim.scope,
          claim.value,
          claim.stored,
        );
      }
      return;
    }
    const outcome = await settle(
      context,
      { ...existing, shard: claim.shard.bits, scope: claim.scope, value: claim.value },
      claim,
    );
    if (outcome === "held") throw new UniqueViolationError(claim.model, claim.field, claim.value);
    if (outcome === "taken") return;
  }
  throw new UniqueViolationError(claim.model, claim.field, claim.value);
}

/**
 * Step 2, inside the row's transaction `tx` (the saga's own, or a caller's of any isolation): the
 * values' advisory locks, then every claim must still name this row. Throws `UniqueViolationError`
 * when one was taken over meanwhile.
 */
export async function checkClaims(
  context: ClaimContext,
  tx: object,
  claims: readonly Claim[],
): Promise<void> {
  let isolation = "";
  for (const claim of sorted(claims)) {
    const [row] = await (tx as Raw).$queryRawUnsafe<{ isolation: string }[]>(
      "SELECT pg_advisory_xact_lock($1::int, $2::int)::text, current_setting('transaction_isolation') AS isolation",
      CLAIM_LOCK,
      lockKey(claim.scope, claim.value),
    );
    isolation = row!.isolation;
  }
  for (const claim of claims) {
    const through = underLock(context, claim.shard, claim.ownerShard, tx, isolation === "read committed");
    const record = await readClaim(context, claim, through);
    if (!record || record.ownerId !== claim.ownerId || record.ownerShard !== claim.ownerShard.bits) {
      throw new UniqueViolationError(claim.model, claim.field, claim.value);
    }
  }
}

/** Step 3: the row was written; its claims are held. */
export async function holdClaims(context: ClaimContext, claims: readonly Claim[]): Promise<void> {
  for (const claim of claims) {
    await clientOf(context, claim.shard).$executeRawUnsafe(
      `UPDATE ${TABLE} SET "state" = 'held' WHERE "scope" = $1 AND "value" = $2 AND "ownerId" = $3 AND "ownerShard" = $4`,
      claim.scope,
      claim.value,
      claim.ownerId,
      claim.ownerShard.bits,
    );
  }
}

/** After a failed write: each claim is settled (held if its row holds the value after all, else released). */
export async function releaseClaims(context: ClaimContext, claims: readonly Claim[]): Promise<void> {
  for (const claim of claims) {
    await settle(context, {
      shard: claim.shard.bits,
      scope: claim.scope,
      value: claim.value,
      ownerShard: claim.ownerShard.bits,
      ownerId: claim.ownerId,
    });
  }
}

/**
 * Decides a claim under the value's advisory lock on its row's database: the row holds the value
 * (`held`: the claim is marked held), or it does not, and the claim is deleted (`released`) or, with
 * `successor`, given to it (`taken`). `changed`: the claim was not as read (someone else decided).
 */
export async function settle(
  context: ClaimContext,
  claim: ClaimOwner,
  successor?: Claim,
): Promise<"held" | "released" | "taken" | "changed"> {
  const spec = context.spec(claim.scope);
  const ownerShard = ShardIdentifier.fromBits(claim.ownerShard);
  return clientOf(context, ownerShard).$transaction(async (tx) => {
    const claims = underLock(context, ShardIdentifier.fromBits(claim.shard), ownerShard, tx, true);
    await (tx as Raw).$queryRawUnsafe(
      "SELECT pg_advisory_xact_lock($1::int, $2::int)::text",
      CLAIM_LOCK,
      lockKey(claim.scope, claim.value),
    );
    let live = false;
    if (spec) {
      const { unique, idField } = spec;
      const row = (await context.call(tx, unique.model, "findUnique", {
        where: { [idField]: claim.ownerId },
        select: { [unique.field]: true },
      })) as Record<string, unknown> | null;
      const stored = row?.[unique.field];
      live = typeof stored === "string" && unique.canonical(stored) === claim.value;
    }
    const same = `"scope" = $1 AND "value" = $2 AND "ownerId" = $3 AND "ownerShard" = $4`;
    const args = [claim.scope, claim.value, claim.ownerId, claim.ownerShard];
    if (live) {
      await claims.$executeRawUnsafe(`UPDATE ${TABLE} SET "state" = 'held' WHERE ${same}`, ...args);
      return "held";
    }
    if (!successor) {
      const n = await claims.$executeRawUnsafe(`DELETE FROM ${TABLE} WHERE ${same}`, ...args);
      return n === 1 ? "released" : "changed";
    }
    const n = await claims.$executeRawUnsafe(
      `UPDATE ${TABLE} SET "ownerShard" = $5, "ownerId" = $6, "stored" = $7, "state" = 'pending', "createdAt" = now() WHERE ${same}`,
      ...args,
      successor.ownerShard.bits,
      successor.ownerId,
      successor.stored,
    );
    return n === 1 ? "taken" : "changed";
  }, UNDER_LOCK);
}

/**
 * Settles every claim left pending longer than `olderThanMs` on every database that holds shards:
 * the crash-recovery half of the saga (run it from a timer, as the relay runs).
 */
export async function repairClaims(
  context: ClaimContext,
  options: { olderThanMs?: number } = {},
): Promise<ClaimRepairReport> {
  const olderThanMs = options.olderThanMs ?? 60_000;
  const report: ClaimRepairReport = { held: 0, released: 0, failed: [] };
  for (const physical of context.placement.physical) {
    if (physical.shards.length === 0) continue;
    const client = context.clients[physical.index] as Raw;
    let pending: ClaimOwner[];
    try {
      pending = await client.$queryRawUnsafe(
        `SELECT "shard", "scope", "value", "ownerShard", "ownerId" FROM ${TABLE} WHERE "state" = 'pending' AND "createdAt" < now() - make_interval(secs => $1::double precision / 1000)`,
        olderThanMs,
      );
    } catch (error) {
      report.failed.push({ database: physical.index, error });
      continue;
    }
    for (const claim of pending) {
      const outcome = await settle(context, claim);
      if (outcome === "held") report.held++;
      else if (outcome === "released") report.released++;
    }
  }
  return report;
}

function sorted(claims: readonly Claim[]): Claim[] {
  return [...claims].sort((a, b) =>
    a.scope === b.scope ? (a.value < b.value ? -1 : a.value > b.value ? 1 : 0) : a.scope < b.scope ? -1 : 1,
  );
}

/** What `backfillClaims` did. */
export interface ClaimBackfillReport {
  /** Rows read. */
  rows: number;
  /** Values claimed (new claims, and claims that were already the row's). */
  claimed: number;
  /**
   * Values two or more existing rows share once canonical: one entry per value, with the row that
   * holds its claim (`heldBy`, the row a unique lookup finds) and every other row that has it
   * (`others`: change their value, then run the backfill again).
   */
  conflicts: ClaimConflict[];
}

/** A value existing rows share (see `ClaimBackfillReport.conflicts`). */
export interface ClaimConflict {
  /** `Model.field`. */
  scope: string;
  /** The canonical value. */
  value: string;
  /** The id of the row holding the value's claim (null: its claim was released meanwhile; run again). */
  heldBy: string | null;
  /** The ids of the other rows with the value, in the order the backfill read them. */
  others: string[];
}

/** Progress of a backfill: after each batch. */
export interface ClaimBackfillProgress {
  database: number;
  rows: number;
  claimed: number;
}

/**
 * Claims the unique values of every existing row of `model` (rows written before the field was
 * declared unique across shards), database by database in batches of `batchSize` by id. Values
 * already held by another row are reported, not thrown. Safe to run again.
 */
export async function backfillClaims(
  context: ClaimContext,
  model: string,
  specs: readonly UniqueSpec[],
  idField: string,
  claimFor: (unique: UniqueSpec, stored: string, ownerId: string) => Claim,
  options: { batchSize?: number; onProgress?: (progress: ClaimBackfillProgress) => void } = {},
): Promise<ClaimBackfillReport> {
  const batchSize = options.batchSize ?? 500;
  const report: ClaimBackfillReport = { rows: 0, claimed: 0, conflicts: [] };
  const conflicts = new Map<string, ClaimConflict>();
  const select = Object.fromEntries([idField, ...specs.map((s) => s.field)].map((f) => [f, true]));
  for (const physical of context.placement.physical) {
    if (physical.shards.length === 0) continue;
    const client = context.clients[physical.index]!;
    let cursor: unknown;
    for (;;) {
      const rows = (await context.call(client, model, "findMany", {
        select,
        orderBy: { [idField]: "asc" },
        take: batchSize,
        ...(cursor !== undefined ? { cursor: { [idField]: cursor }, skip: 1 } : {}),
      })) as Record<string, unknown>[];
      for (const row of rows) {
        report.rows++;
        for (const unique of specs) {
          const stored = row[unique.field];
          if (typeof stored !== "string") continue;
          const claim = claimFor(unique, stored, row[idField] as string);
          try {
            await takeClaims(context, [claim]);
            await holdClaims(context, [claim]);
            report.claimed++;
          } catch (error) {
            if (!(error instanceof UniqueViolationError)) throw error;
            const key = JSON.stringify([claim.scope, claim.value]);
            let conflict = conflicts.get(key);
            if (!conflict) {
              const holder = await readClaim(context, claim);
              conflict = {
                scope: claim.scope,
                value: claim.value,
                heldBy: holder?.ownerId ?? null,
                others: [],
              };
              conflicts.set(key, conflict);
              report.conflicts.push(conflict);
            }
            conflict.others.push(claim.ownerId);
          }
        }
      }
      options.onProgress?.({ database: physical.index, rows: report.rows, claimed: report.claimed });
      if (rows.length < batchSize) break;
      cursor = rows[rows.length - 1]![idField];
    }
  }
  return report;
}
