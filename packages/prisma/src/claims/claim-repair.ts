// The maintenance half of unique claims: `repairClaims` settles claims a crashed write left
// pending (the saga's crash recovery, run from a timer) and forgets old tokens; `backfillClaims`
// claims the values of rows written before a field was declared unique across shards, reporting
// the values rows already share, and sweeps claims left on the wrong shard.
import type { ShardIdentifier } from "@shardkit/id";
import { UniqueViolationError } from "../errors.js";
import type { Claim, UniqueSpec } from "../unique.js";
import {
  type ClaimContext,
  type ClaimOwner,
  holdClaims,
  type Raw,
  readClaim,
  settle,
  TABLE,
  TOKENS,
  takeClaims,
} from "./claims.js";

/** What `repairClaims` did. */
export interface ClaimRepairReport {
  /** Pending claims whose row holds the value: now held. */
  held: number;
  /** Claims whose row does not hold the value: deleted. */
  released: number;
  /**
   * What could not be done, with its error: a database whose claims could not be read, a claim
   * whose row's database did not answer (`database` is the claim's), old tokens not forgotten.
   */
  failed: { database: number; error: unknown }[];
}

/**
 * Settles every claim left pending longer than `olderThanMs` on every database that holds shards,
 * and forgets the write tokens older than `tokensOlderThanMs` (default a day: far longer than any
 * write waits between taking its claim and writing its row): the crash-recovery half of the saga
 * (run it from a timer, as the relay runs).
 */
export async function repairClaims(
  context: ClaimContext,
  options: { olderThanMs?: number; tokensOlderThanMs?: number } = {},
): Promise<ClaimRepairReport> {
  const olderThanMs = options.olderThanMs ?? 60_000;
  const tokensOlderThanMs = options.tokensOlderThanMs ?? 86_400_000;
  const report: ClaimRepairReport = { held: 0, released: 0, failed: [] };
  for (const physical of context.layout.databases) {
    if (physical.shards.length === 0) continue;
    const client = context.clients[physical.index] as Raw;
    let pending: ClaimOwner[];
    try {
      pending = await context.bounded(physical.index, () =>
        client.$queryRawUnsafe(
          `SELECT "shard", "scope", "value", "ownerShard", "ownerId", "token" FROM ${TABLE} WHERE "state" = 'pending' AND "createdAt" < now() - make_interval(secs => $1::double precision / 1000)`,
          olderThanMs,
        ),
      );
    } catch (error) {
      report.failed.push({ database: physical.index, error });
      continue;
    }
    for (const claim of pending) {
      // A claim whose row's database is down (or moving) is left for the next run; the rest go on.
      try {
        const outcome = await settle(context, claim);
        if (outcome === "held") report.held++;
        else if (outcome === "released") report.released++;
      } catch (error) {
        report.failed.push({ database: physical.index, error });
      }
    }
    try {
      await context.bounded(physical.index, () =>
        client.$executeRawUnsafe(
          `DELETE FROM ${TOKENS} WHERE "createdAt" < now() - make_interval(secs => $1::double precision / 1000)`,
          tokensOlderThanMs,
        ),
      );
    } catch (error) {
      report.failed.push({ database: physical.index, error });
    }
  }
  return report;
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
  /**
   * Claims found where their value's shard does not put them (left by a release that placed
   * claims with another hash), once every row's value was claimed where it belongs: removed, or
   * labelled with the right shard when that shard is on the same database. A misplaced claim is
   * never read, but it would move with the shard it names and meet the real one.
   */
  misplaced: number;
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
  placeOf: (unique: UniqueSpec, value: string) => ShardIdentifier,
  options: { batchSize?: number; onProgress?: (progress: ClaimBackfillProgress) => void } = {},
): Promise<ClaimBackfillReport> {
  const batchSize = options.batchSize ?? 500;
  const report: ClaimBackfillReport = { rows: 0, claimed: 0, conflicts: [], misplaced: 0 };
  const conflicts = new Map<string, ClaimConflict>();
  const select = Object.fromEntries([idField, ...specs.map((s) => s.field)].map((f) => [f, true]));
  for (const physical of context.layout.databases) {
    if (physical.shards.length === 0) continue;
    const client = context.clients[physical.index]!;
    let cursor: unknown;
    for (;;) {
      const rows = (await context.bounded(physical.index, () =>
        context.call(client, model, "findMany", {
          select,
          orderBy: { [idField]: "asc" },
          take: batchSize,
          ...(cursor !== undefined ? { cursor: { [idField]: cursor }, skip: 1 } : {}),
        }),
      )) as Record<string, unknown>[];
      for (const row of rows) {
        report.rows++;
        for (const unique of specs) {
          const stored = row[unique.field];
          if (typeof stored !== "string") continue;
          const claim = claimFor(unique, stored, row[idField] as string);
          try {
            await holdClaims(context, await takeClaims(context, [claim]));
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
  report.misplaced = await sweepMisplaced(context, specs, placeOf, batchSize);
  return report;
}

/**
 * Removes the claims of `specs` that their value's shard does not put where they are, or labels
 * them with the right shard when it is on the same database (see `ClaimBackfillReport.misplaced`).
 * Each statement names the label it read, so a claim taken meanwhile where it belongs is untouched.
 */
async function sweepMisplaced(
  context: ClaimContext,
  specs: readonly UniqueSpec[],
  placeOf: (unique: UniqueSpec, value: string) => ShardIdentifier,
  batchSize: number,
): Promise<number> {
  const byScope = new Map(specs.map((s) => [s.scope, s]));
  let misplaced = 0;
  for (const physical of context.layout.databases) {
    if (physical.shards.length === 0) continue;
    const client = context.clients[physical.index] as Raw;
    let after: [string, string] = ["", ""];
    for (;;) {
      const rows = await context.bounded(physical.index, () =>
        client.$queryRawUnsafe<{ shard: number; scope: string; value: string }[]>(
          `SELECT "shard", "scope", "value" FROM ${TABLE} WHERE "scope" = ANY($1::text[]) AND ("scope", "value") > ($2, $3) ORDER BY "scope", "value" LIMIT ${batchSize}`,
          [...byScope.keys()],
          after[0],
          after[1],
        ),
      );
      for (const row of rows) {
        const placed = placeOf(byScope.get(row.scope)!, row.value);
        const here = context.layout.databaseOf(placed) === physical;
        if (here && placed.bits === row.shard) continue;
        // Relabelled where it is when its shard lives here, else removed; only under the label read.
        const where = `"scope" = $1 AND "value" = $2 AND "shard" = $3`;
        const [sql, ...label] = here
          ? [`UPDATE ${TABLE} SET "shard" = $4 WHERE ${where}`, placed.bits]
          : [`DELETE FROM ${TABLE} WHERE ${where}`];
        misplaced += await context.bounded(physical.index, () =>
          client.$executeRawUnsafe(sql, row.scope, row.value, row.shard, ...label),
        );
      }
      if (rows.length < batchSize) break;
      const last = rows[rows.length - 1]!;
      after = [last.scope, last.value];
    }
  }
  return misplaced;
}
