// The steps of a move's lease that change a shard's owner, forward, each by compare-and-set on the
// records under the lease: arm, receive, fence, copy in, mark the copy checked, decide the switch at
// the source and complete it at the target (`completeSwitch`, heal.ts, which a router runs too when
// the mover stopped between the two commits), and an earlier version's missing tombstone. Each
// keeps what it changes of the lease's own state (when it fenced, whether it switched).
import type { ShardClient } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { completeSwitch } from "./heal.js";
import { HeldLease, nullIfEmpty } from "./lease-held.js";
import { type Raw, raw } from "./raw.js";

/** A held lease with the steps that change the shard's owner (see `ShardLease`). */
export abstract class SwitchingLease<Client extends ShardClient = ShardClient> extends HeldLease<Client> {
  /**
   * Lists the shard in its owner's fence while the owner still owns it, naming where it will go: its
   * writes then read its record (and note the keys of the rows they write, which the move verifies
   * again inside its fence), and the fence that follows is one row update, with no DDL waiting for
   * every writer of the tables.
   */
  async arm(): Promise<void> {
    const { map, shard } = this;
    await this.sourceStep(async (tx) => {
      const armed = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET peer = $2, attempt = $3, "updatedAt" = now()
           WHERE shard = $1 AND state = 'owned' AND (peer IS NULL OR attempt = $3)`,
        shard.bits,
        map.identityOf(this.to),
        this.attempt,
      );
      if (armed !== 1) throw map.conflict(shard, `not simply owned by ${this.from.name}`);
      await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, shard.bits);
    });
  }

  /**
   * The target records the shard as incoming for this attempt (at the source's epoch) and fences it:
   * nothing but the mover's own sessions and replication write its rows there until the switch.
   */
  async receive(): Promise<void> {
    const { map, shard } = this;
    await this.targetStep(
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
          map.identityOf(this.from),
          this.attempt,
        );
        if (!row)
          throw map.conflict(
            shard,
            `${this.to.name} holds a record of it that is neither a tombstone nor an older incoming one`,
          );
      },
      { list: shard.bits },
    );
  }

  /**
   * The source stops taking the shard's writes: in one transaction, behind the writers already at
   * work on the shard (its advisory lock, taken exclusively), its record goes from owned to fenced by
   * this attempt, and every later write to its rows is refused. A shard not armed first is listed in
   * its tables' fence before (each table waits for its writers then). Returns the epoch.
   */
  async fence(): Promise<{ epoch: number; database: string }> {
    const { map, shard } = this;
    // The freeze is counted from here: the fence's own check extends the lease no further than the
    // freeze budget (`extensionMs`).
    this.fencedAt = performance.now();
    const epoch = await this.sourceStep(
      async (tx) => {
        await tx.$queryRawUnsafe(
          `SELECT pg_advisory_xact_lock(${LOCKS.shardWriters}, $1)::text AS locked`,
          shard.bits,
        );
        const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
          `UPDATE "ShardOwnership" SET state = 'fenced', peer = $2, attempt = $3, "updatedAt" = now()
             WHERE shard = $1 AND state = 'owned' AND (attempt IS NULL OR attempt = $3) RETURNING epoch`,
          shard.bits,
          map.identityOf(this.to),
          this.attempt,
        );
        if (!row) throw map.conflict(shard, `not owned by ${this.from.name} (fenced or moved already)`);
        return row.epoch;
      },
      // Nothing more while writes wait: the listing is tidied after the switch (`tidy`).
      { list: shard.bits, step: "fenced", relist: false },
    ).catch((error: unknown) => {
      this.fencedAt = undefined;
      throw error;
    });
    return { epoch, database: this.from.name };
  }

  /**
   * `fn` in a transaction at the target that passes its fence (`SET LOCAL shardkit.mover = 'on'`):
   * copying the shard's rows in, as this mover. Checked against the lease like every step.
   */
  copyIn<R>(fn: (tx: Raw) => Promise<R>): Promise<R> {
    return this.targetStep(
      async (tx) => {
        await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
        return fn(tx);
      },
      { change: false },
    );
  }

  /**
   * Records at the target that this lease (its fencing token) checked the copy: a switch takes no
   * other. A lease that took a move over, or a fence a router gave back meanwhile, must check again.
   */
  async verified(): Promise<void> {
    const { map, shard } = this;
    await this.targetStep(
      async (tx) => {
        const marked = await tx.$executeRawUnsafe(
          `UPDATE "ShardOwnership" SET "verifiedBy" = $3, "updatedAt" = now()
             WHERE shard = $1 AND state = 'incoming' AND attempt = $2`,
          shard.bits,
          this.attempt,
          this.token,
        );
        if (marked !== 1)
          throw map.conflict(shard, `${this.to.name} holds no incoming copy of this move attempt`);
      },
      { relist: false },
    );
  }

  /**
   * The switch's first commit alone: the decision at the source (see `switch`). Until the target
   * owns the shard (`switch` does it next; a router refused by the target's incoming record does it
   * too), no database takes the shard's writes.
   */
  async decide(): Promise<{ epoch: number }> {
    const { map, shard, attempt, token } = this;
    const epoch = await this.sourceStep(
      async (tx) => {
        const [copy] = await raw(this.to).$queryRawUnsafe<
          { state: string; attempt: string | null; verifiedBy: number | null }[]
        >(`SELECT state, attempt, "verifiedBy" FROM "ShardOwnership" WHERE shard = $1`, shard.bits);
        if (!(copy?.state === "incoming" && copy.attempt === attempt && copy.verifiedBy === token)) {
          const why = !copy
            ? "no record"
            : `${copy.state}${copy.attempt === attempt ? "" : " for another attempt"}${copy.verifiedBy === token ? "" : copy.verifiedBy === null ? ", not checked" : ", checked by an earlier holder"}`;
          throw map.conflict(
            shard,
            `${this.to.name}'s copy was not checked by this lease (${why}): no switch`,
          );
        }
        const [row] = await tx.$queryRawUnsafe<{ epoch: number }[]>(
          `UPDATE "ShardOwnership" SET state = 'moved', epoch = epoch + 1, peer = $2, "updatedAt" = now()
             WHERE shard = $1 AND state = 'fenced' AND attempt = $3 RETURNING epoch`,
          shard.bits,
          map.identityOf(this.to),
          attempt,
        );
        if (!row) throw map.conflict(shard, `not fenced by this move at ${this.from.name}: no switch`);
        return row.epoch;
      },
      { relist: false, step: "switched" },
    );
    this.decidedSwitch = true;
    return { epoch };
  }

  /**
   * The change of owner, in two commits. First the decision, at the source, where the lease is: only
   * if the source is fenced by this attempt and the target holds this attempt's verified copy, the
   * source's record becomes a tombstone at the next epoch naming the target (and the move's record
   * says switched), in the same transaction as the lease's check: a router giving a lapsed fence
   * back changes the same record, so exactly one of the two succeeds. Then the target owns the shard
   * at that epoch (`completeSwitch`; a router refused there by the incoming record does it too, from
   * the tombstone). Returns the new epoch, and when (`performance.now()`) the target owned the shard.
   */
  async switch(): Promise<{ epoch: number; ownedAt: number }> {
    const { epoch } = await this.decide();
    await completeSwitch(this.map, this.to, this.shard, this.attempt, epoch);
    const ownedAt = performance.now(); // the target takes the shard's writes from here
    await this.map.refresh();
    return { epoch, ownedAt };
  }

  /**
   * A move of an earlier version that switched (the target owns the shard at `epoch`) but did not
   * record the source's tombstone: records it.
   */
  async entomb(epoch: number): Promise<void> {
    await this.sourceStep(async (tx) => {
      await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'moved', epoch = $2, peer = $3, attempt = $4, "updatedAt" = now()
           WHERE shard = $1 AND state = 'fenced' AND epoch < $2`,
        this.shard.bits,
        epoch,
        this.map.identityOf(this.to),
        nullIfEmpty(this.attempt),
      );
    });
  }
}
