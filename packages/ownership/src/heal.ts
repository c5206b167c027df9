// What a router changes in the records itself, so that no shard waits for a person: a fence (or an
// arming) whose move stopped is given back to its owner (`heal`), and a switch decided at the old
// owner is completed at the new one (`complete`). Each runs at most once at a time per shard in a
// router, bounded by the map's `timeoutMs`. The second commit of a switch (`completeSwitch`) is
// here, on the router's side: the mover runs it right after its decision, a router when the mover
// stopped between the two commits.
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { orAfter } from "@shardkit/prisma/internal";
import type { OwnershipRow } from "./owners.js";
import { unbounded } from "./raw.js";
import type { LeaseMap } from "./records.js";
import type { Signals } from "./signals.js";

/** What the repairs need of the partition map. */
export interface RepairingMap<Client extends ShardClient>
  extends Pick<LeaseMap<Client>, "changes" | "conflict"> {
  /** How this router names itself in the records of what it changes. */
  readonly name: string;
  /** How long a repair may take before the router stops waiting for it (ms). */
  readonly timeoutMs: number;
}

/** A router's copy of the records (see `RouterView`), as `complete` reads it. */
export interface RecordsRead<Client extends ShardClient> {
  readonly rows: ReadonlyMap<Database<Client>, readonly OwnershipRow[]>;
  readonly identities: ReadonlyMap<Database<Client>, string>;
}

/** A router's repairs of the records: give-backs of stopped moves' fences, completions of decided switches. */
export class RouterRepairs<Client extends ShardClient> {
  /** Give-backs and completions this router is running (one at a time per shard and kind; see `once`). */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly map: RepairingMap<Client>,
    private readonly signals: Signals,
  ) {}

  /**
   * `heal`, at most one at a time per shard in this router, bounded by `timeoutMs` (a frozen
   * database must not hold the router's waiting writes): whether it gave the shard back.
   */
  giveBack(database: Database<Client>, shard: ShardIdentifier): Promise<boolean> {
    return this.once(`heal ${shard.bits}`, () => this.heal(database, shard));
  }

  /**
   * Runs `work` unless work of the same `key` is running in this router, bounded by `timeoutMs`
   * (false when it failed, did not finish in time, or was already running).
   */
  async once(key: string, work: () => Promise<boolean>): Promise<boolean> {
    if (this.inFlight.has(key)) return false;
    this.inFlight.add(key);
    try {
      // Work shared by this router's callers, a mover among them: under none's deadline.
      return await orAfter(this.map.timeoutMs, false, () => unbounded(work).catch(() => false));
    } finally {
      this.inFlight.delete(key);
    }
  }

  /**
   * Gives a fenced (or armed) shard back to `database`, its owner, when the move holding it has
   * stopped: its lease lapsed (its mover died, hangs, or gave it up) before it switched. One transaction under
   * the database's change lock, by compare-and-set on the same record a switch changes, so the two
   * never both succeed: the move's record is locked and must still be lapsed and unswitched, the
   * record must still be fenced by that move; the record becomes owned again and the move's token
   * grows (its mover, should it wake up, is refused at its next step) and it is marked abandoned
   * (the next move of the shard takes it over and undoes what is left: the target's copy, the
   * replication objects). No DDL: the shard's fence listing stays until then.
   */
  private async heal(database: Database<Client>, shard: ShardIdentifier): Promise<boolean> {
    const healed = await this.map.changes.locked(database, async (tx) => {
      const [move] = await tx.$queryRawUnsafe<{ attempt: string; step: string; lapsed: boolean }[]>(
        `SELECT attempt, step, "expiresAt" < clock_timestamp() AS lapsed FROM "ShardMove" WHERE shard = $1 FOR UPDATE`,
        shard.bits,
      );
      if (!move?.lapsed || move.attempt === "" || move.step === "switched" || move.step === "abandoned")
        return false;
      const given = await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, attempt = NULL, "updatedAt" = now()
         WHERE shard = $1 AND state IN ('fenced', 'owned') AND attempt = $2`,
        shard.bits,
        move.attempt,
      );
      if (given !== 1) return false;
      await tx.$executeRawUnsafe(
        `UPDATE "ShardMove" SET token = token + 1, step = 'abandoned', holder = $2, "updatedAt" = clock_timestamp()
         WHERE shard = $1`,
        shard.bits,
        `${this.map.name}, which gave the shard back to ${database.name} after the lease lapsed`,
      );
      return true;
    });
    if (healed) this.signals.emit({ type: "heal", shard, database: database.name });
    return healed;
  }

  /**
   * Completes a switch decided at the old owner (its tombstone of a move attempt names `database`)
   * when `database` still holds the shard incoming: its mover stopped between the two commits. The
   * tombstone is read from this router's copy of the records (`read`, refreshed just before).
   */
  async complete(
    database: Database<Client>,
    shard: ShardIdentifier,
    attempt: string | null | undefined,
    read: RecordsRead<Client>,
  ): Promise<boolean> {
    const identity = read.identities.get(database);
    if (!attempt || !identity) return false;
    for (const rows of read.rows.values()) {
      const tombstone = rows.find(
        (r) => r.shard === shard.bits && r.state === "moved" && r.peer === identity && r.attempt === attempt,
      );
      if (!tombstone) continue;
      const done = await completeSwitch(this.map, database, shard, attempt, tombstone.epoch);
      if (done) this.signals.emit({ type: "completion", shard, database: database.name });
      return done;
    }
    return false;
  }
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
