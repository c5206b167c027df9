// The steps that change a shard's owner, forward, each by compare-and-set on the records under the
// move's lease: arm, receive, fence, copy in, mark the copy checked, decide the switch at the source
// and complete it at the target (`completeSwitch`, which a router runs too when the mover stopped
// between the two commits), and an earlier version's missing tombstone. `ShardLease` (lease.ts)
// runs them and keeps what they change of its own state (when it fenced, whether it switched).
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { atSource, atTarget, type Held, nullIfEmpty } from "./lease-held.js";
import { type Raw, raw } from "./raw.js";
import type { LeaseMap } from "./records.js";

/** Lists the shard in its owner's fence while the owner still owns it, naming where it will go (see `ShardLease.arm`). */
export async function arm<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  const { map, shard } = held;
  await atSource(held, async (tx) => {
    const armed = await tx.$executeRawUnsafe(
      `UPDATE "ShardOwnership" SET peer = $2, attempt = $3, "updatedAt" = now()
         WHERE shard = $1 AND state = 'owned' AND (peer IS NULL OR attempt = $3)`,
      shard.bits,
      map.identityOf(held.to),
      held.attempt,
    );
    if (armed !== 1) throw map.conflict(shard, `not simply owned by ${held.from.name}`);
    await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, shard.bits);
  });
}

/** The target records the shard as incoming for this attempt, at the source's epoch, and fences it (see `ShardLease.receive`). */
export async function receive<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  const { map, shard } = held;
  await atTarget(
    held,
    async (tx, source) => {
      const [own] = await source.$queryRawUnsafe<{ epoch: number }[]>(
        `SELECT epoch FROM "ShardOwnership" WHERE shard = $1`,
        shard.bits,
      );
      const [row] = await tx.$queryRawUnsafe<{ shard: number }[]>(
        `INSERT INTO "ShardOwnership" (shard, epoch, state, peer, attempt, "verifiedBy") VALUES ($1, $2, 'incoming', $3, $4, NULL)
           ON CONFLICT (shard) DO UPDATE SET epoch = EXCLUDED.epoch, state = 'incoming', peer = EXCLUDED.peer,
             attempt = EXCLUDED.attempt, "verifiedBy" = NULL, "updatedAt" = now()
             WHERE "ShardOwnership".state IN ('moved', 'incoming') AND "ShardOwnership".epoch <= EXCLUDED.epoch
           RETURNING shard`,
        shard.bits,
        own?.epoch ?? 0,
        map.identityOf(held.from),
        held.attempt,
      );
      if (!row)
        throw map.conflict(
          shard,
          `${held.to.name} holds a record of it that is neither a tombstone nor an older incoming one`,
        );
    },
    { list: shard.bits },
  );
}

/**
 * The source's record goes from owned to fenced by this attempt, behind the writers already at work
 * on the shard (its advisory lock, taken exclusively); the move's record says fenced. Returns the
 * epoch (see `ShardLease.fence`).
 */
export function fence<Client extends ShardClient>(held: Held<Client>): Promise<number> {
  const { map, shard } = held;
  return atSource(
    held,
    async (tx) => {
      await tx.$queryRawUnsafe(
        `SELECT pg_advisory_xact_lock(${LOCKS.shardWriters}, $1)::text AS locked`,
        shard.bits,
      );
      const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
        `UPDATE "ShardOwnership" SET state = 'fenced', peer = $2, attempt = $3, "updatedAt" = now()
           WHERE shard = $1 AND state = 'owned' AND (attempt IS NULL OR attempt = $3) RETURNING epoch`,
        shard.bits,
        map.identityOf(held.to),
        held.attempt,
      );
      if (!row) throw map.conflict(shard, `not owned by ${held.from.name} (fenced or moved already)`);
      return row.epoch;
    },
    // Nothing more while writes wait: the listing is tidied after the switch (`tidy`).
    { list: shard.bits, step: "fenced", relist: false },
  );
}

/** `fn` in a transaction at the target that passes its fence, as this mover (see `ShardLease.copyIn`). */
export function copyIn<Client extends ShardClient, R>(
  held: Held<Client>,
  fn: (tx: Raw) => Promise<R>,
): Promise<R> {
  return atTarget(
    held,
    async (tx) => {
      await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
      return fn(tx);
    },
    { change: false },
  );
}

/** Records at the target that this lease's token checked the copy (see `ShardLease.verified`). */
export async function verified<Client extends ShardClient>(held: Held<Client>): Promise<void> {
  const { map, shard } = held;
  await atTarget(
    held,
    async (tx) => {
      const marked = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET "verifiedBy" = $3, "updatedAt" = now()
           WHERE shard = $1 AND state = 'incoming' AND attempt = $2`,
        shard.bits,
        held.attempt,
        held.token,
      );
      if (marked !== 1)
        throw map.conflict(shard, `${held.to.name} holds no incoming copy of this move attempt`);
    },
    { relist: false },
  );
}

/**
 * The switch's first commit: at the source, only if it is fenced by this attempt and the target holds
 * this attempt's copy checked by this token, its record becomes a tombstone at the next epoch naming
 * the target, and the move's record says switched. Returns the new epoch (see `ShardLease.decide`).
 */
export function decide<Client extends ShardClient>(held: Held<Client>): Promise<number> {
  const { map, shard, attempt, token } = held;
  return atSource(
    held,
    async (tx) => {
      const [copy] = await raw(held.to).$queryRawUnsafe<
        { state: string; attempt: string | null; verifiedBy: number | null }[]
      >(`SELECT state, attempt, "verifiedBy" FROM "ShardOwnership" WHERE shard = $1`, shard.bits);
      if (!(copy?.state === "incoming" && copy.attempt === attempt && copy.verifiedBy === token)) {
        const why = !copy
          ? "no record"
          : `${copy.state}${copy.attempt === attempt ? "" : " for another attempt"}${copy.verifiedBy === token ? "" : copy.verifiedBy === null ? ", not checked" : ", checked by an earlier holder"}`;
        throw map.conflict(shard, `${held.to.name}'s copy was not checked by this lease (${why}): no switch`);
      }
      const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
        `UPDATE "ShardOwnership" SET state = 'moved', epoch = epoch + 1, peer = $2, "updatedAt" = now()
           WHERE shard = $1 AND state = 'fenced' AND attempt = $3 RETURNING epoch`,
        shard.bits,
        map.identityOf(held.to),
        attempt,
      );
      if (!row) throw map.conflict(shard, `not fenced by this move at ${held.from.name}: no switch`);
      return row.epoch;
    },
    { relist: false, step: "switched" },
  );
}

/** Records the source's tombstone of an earlier version's switch, at `epoch` (see `ShardLease.entomb`). */
export async function entomb<Client extends ShardClient>(held: Held<Client>, epoch: number): Promise<void> {
  await atSource(held, async (tx) => {
    await tx.$executeRawUnsafe(
      `UPDATE "ShardOwnership" SET state = 'moved', epoch = $2, peer = $3, attempt = $4, "updatedAt" = now()
         WHERE shard = $1 AND state = 'fenced' AND epoch < $2`,
      held.shard.bits,
      epoch,
      held.map.identityOf(held.to),
      nullIfEmpty(held.attempt),
    );
  });
}

/**
 * The second commit of a switch: the target owns the shard at `epoch` (the one the source's
 * tombstone records), but only from this attempt's verified incoming copy. The mover does it right
 * after the decision; a router refused by the target's incoming record does it too when the
 * tombstone it read says the switch was decided (the mover may have died in between). Returns false
 * when it was done already.
 */
export async function completeSwitch<Client extends ShardClient>(
  map: Pick<LeaseMap<Client>, "changes" | "conflict">,
  to: Database<Client>,
  shard: ShardIdentifier,
  attempt: string,
  epoch: number,
): Promise<boolean> {
  return map.changes.change(
    to,
    async (tx) => {
      const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
        `UPDATE "ShardOwnership" SET state = 'owned', epoch = $2, peer = NULL, attempt = NULL, "verifiedBy" = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state = 'incoming' AND attempt = $3 AND "verifiedBy" IS NOT NULL RETURNING epoch`,
        shard.bits,
        epoch,
        attempt,
      );
      if (row) return true;
      const [now] = await tx.$queryRawUnsafe<{ state: string; epoch: number }[]>(
        `SELECT state, epoch FROM "ShardOwnership" WHERE shard = $1`,
        shard.bits,
      );
      if (now && now.epoch >= epoch && now.state !== "incoming") return false;
      throw map.conflict(
        shard,
        `${to.name} holds no verified copy of the switched move (${now ? `${now.state} at epoch ${now.epoch}` : "no record"})`,
      );
    },
    { relist: false },
  );
}
