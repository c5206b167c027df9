// The steps that end a move under its lease, each guarded by what the databases record, never by
// what the mover remembers: the old copy cleaned up at the source (only under this move's
// tombstone), the move undone (the source unfenced; the target's copy discarded only while the
// source has not switched to it), and the lease's record released (only once the move is finished
// or undone); and the lease given up at once without ending the move (`lapse`: a mover that could
// not undo what it did). `ShardLease` (lease.ts) runs them.
import type { ShardClient } from "@shardkit/prisma";
import { MoveTimeoutError, OwnershipOptionsError } from "./errors.js";
import { atSource, atTarget, type Held, nullIfEmpty } from "./lease-held.js";
import { bounded, type Raw, raw } from "./raw.js";
import { type FencedTable, shardOfRowSql } from "./sql.js";

/** Deletes the source's old copy in batches, each under this move's tombstone (see `ShardLease.cleanup`). */
export async function cleanup<Client extends ShardClient>(
  held: Held<Client>,
  options: { batchSize?: number },
): Promise<Record<string, number>> {
  const { map, shard } = held;
  const batchSize = options.batchSize ?? 1000;
  if (!(Number.isSafeInteger(batchSize) && batchSize >= 1))
    throw new OwnershipOptionsError([`cleanup: batchSize must be an integer >= 1, got ${batchSize}`]);
  const deleted: Record<string, number> = {};
  for (const table of map.tables) {
    deleted[table.table] = 0;
    // Each batch is followed by a pause as long as it took: the cleanup (off the critical path,
    // the shard has moved) uses at most about half of a core, and leaves the rest to the writes.
    for (;;) {
      const started = performance.now();
      const batch = await raw(held.from).$transaction(async (tx) => {
        await held.check(tx);
        const [own] = await tx.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
          `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
          shard.bits,
        );
        if (!(own?.state === "moved" && own.attempt === nullIfEmpty(held.attempt)))
          throw map.conflict(
            shard,
            `${held.from.name} holds no tombstone of this move (${own?.state ?? "no record"}): its rows are not an old copy`,
          );
        await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
        return tx.$executeRawUnsafe(
          `DELETE FROM "${table.table}" WHERE ctid IN (SELECT ctid FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1 LIMIT ${batchSize})`,
          shard.bits,
        );
      });
      deleted[table.table] = (deleted[table.table] ?? 0) + batch;
      if (batch < batchSize) break;
      await new Promise((r) => setTimeout(r, Math.min(1000, performance.now() - started)));
    }
  }
  return deleted;
}

/** The source owns the shard again, unarmed, unless it switched already (see `ShardLease.unfence`). */
export async function unfence<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  const { map, shard } = held;
  await atSource(held, async (tx) => {
    await tx.$executeRawUnsafe(
      `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, attempt = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state IN ('owned', 'fenced') AND (attempt IS NULL OR attempt = $2)`,
      shard.bits,
      held.attempt,
    );
    const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null }[]>(
      `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1`,
      shard.bits,
    );
    if (own?.state !== "owned" || own.peer !== null)
      throw map.conflict(
        shard,
        `${held.from.name} holds it ${own?.state ?? "with no record"}: the move cannot be undone there`,
      );
  });
}

/**
 * Deletes the target's copy in batches, then its incoming record, each only while the source has not
 * switched to this attempt and the target's record is incoming (see `ShardLease.discard`).
 */
export async function discard<Client extends ShardClient>(
  held: Held<Client>,
  options: { batchSize?: number },
): Promise<void> {
  const { map, shard } = held;
  const batchSize = options.batchSize ?? 10_000;
  if (!(Number.isSafeInteger(batchSize) && batchSize >= 1))
    throw new OwnershipOptionsError([`discard: batchSize must be an integer >= 1, got ${batchSize}`]);
  /** Whether the target's rows of the shard are this move's copy to discard (throws when the source switched to it). */
  const discardable = async (tx: Raw, source: Raw) => {
    const [own] = await source.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
      `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
      shard.bits,
    );
    if (own?.state === "moved" && own.attempt === nullIfEmpty(held.attempt))
      throw map.conflict(
        shard,
        `${held.from.name} switched it to ${held.to.name}: the copy there is the shard now`,
      );
    const [target] = await tx.$queryRawUnsafe<{ state: string }[]>(
      `SELECT state FROM "ShardOwnership" WHERE shard = $1 FOR UPDATE`,
      shard.bits,
    );
    if (target?.state !== "incoming") return false; // nothing received: whatever rows it has are not this move's
    await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
    return true;
  };
  const remove = (tx: Raw, table: FencedTable, limit: string) =>
    tx.$executeRawUnsafe(
      `DELETE FROM "${table.table}" WHERE ctid IN (SELECT ctid FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1${limit})`,
      shard.bits,
    );
  for (const table of map.tables) {
    for (;;) {
      const batch = await atTarget(
        held,
        async (tx, source) =>
          (await discardable(tx, source)) ? remove(tx, table, ` LIMIT ${batchSize}`) : undefined,
        { change: false },
      );
      if (batch === undefined) return;
      if (batch < batchSize) break;
    }
  }
  // The last rows (none, unless the mover's own sessions wrote meanwhile) and the record, together.
  await atTarget(held, async (tx, source) => {
    if (!(await discardable(tx, source))) return;
    for (const table of map.tables) await remove(tx, table, "");
    await tx.$executeRawUnsafe(
      `DELETE FROM "ShardOwnership" WHERE shard = $1 AND state = 'incoming'`,
      shard.bits,
    );
  });
}

/**
 * Deletes the move's record and the keys it noted, checked against the lease, only once the move is
 * finished (the source's tombstone) or undone (the source simply owns the shard; see `ShardLease.release`).
 */
export async function release<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  const { map, shard } = held;
  await raw(held.from).$transaction(async (tx) => {
    await held.check(tx);
    const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null; attempt: string | null }[]>(
      `SELECT state, peer, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
      shard.bits,
    );
    const undone = own?.state === "owned" && own.peer === null;
    const finished = own?.state === "moved" && own.attempt === nullIfEmpty(held.attempt);
    if (!undone && !finished)
      throw map.conflict(
        shard,
        `${held.from.name} holds it ${own ? `${own.state}${own.peer ? ` for ${own.peer}` : ""}` : "with no record"}: finish the move (switch) or undo it (unfence) before releasing its lease`,
      );
    await tx.$executeRawUnsafe(
      `DELETE FROM "ShardMove" WHERE shard = $1 AND attempt = $2 AND token = $3`,
      shard.bits,
      held.attempt,
      held.token,
    );
    await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, shard.bits);
  });
}

/** Ends the lease's period now, without ending the move; best effort, within one period (see `ShardLease.lapse`). */
export async function lapse<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  // Its own deadline (a lease's period), whatever the work that failed had left: unanswered, the
  // lease lapses by itself within its period.
  const deadline = {
    at: performance.now() + held.leaseMs,
    late: () => new MoveTimeoutError(held.shard, "giving the lease up", held.leaseMs),
  };
  await bounded(deadline, () =>
    raw(held.from).$executeRawUnsafe(
      `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() WHERE shard = $1 AND attempt = $2 AND token = $3`,
      held.shard.bits,
      held.attempt,
      held.token,
    ),
  ).catch(() => {});
}
