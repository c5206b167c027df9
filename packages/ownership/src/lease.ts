// `ShardLease`, the lease of one move of one shard: taking it (a new move's, or a stopped move's taken
// over; their compare-and-sets are in lease-take.ts), and the steps that end a move, each guarded by
// what the databases record, never by what the mover remembers: the old copy cleaned up at the
// source (only under this move's tombstone), the move undone (the source unfenced; the target's copy
// discarded only while the source has not switched to it), the lease's record released (only once
// the move is finished or undone), and the lease given up at once without ending the move (`lapse`).
// Its state, renewal and guard are `HeldLease`'s (lease-held.ts); the steps that change the owner
// are `SwitchingLease`'s (lease-switch.ts). The partition map hands out no lease: moves own theirs.
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRef } from "@shardkit/prisma";
import { MoveTimeoutError, OwnershipOptionsError } from "./errors.js";
import { nullIfEmpty } from "./lease-held.js";
import { SwitchingLease } from "./lease-switch.js";
import { type LeaseOptions, type Taken, takeLease, takeOverLease } from "./lease-take.js";
import { bounded, type Raw, raw } from "./raw.js";
import { inProgress, isLive, type LeaseMap, type MoveRecord, readMove } from "./records.js";
import { type FencedTable, shardOfRowSql } from "./sql.js";

/**
 * The lease of one move of one shard: whoever changes a shard's owner (`moveShard`, a balancer, a
 * person at a terminal) holds one. It is a row of the source database's `ShardMove`, taken by
 * compare-and-set, with a holder, an expiry by that database's clock and a fencing token. Every step
 * below checks it (and renews it) in the same transaction as the change it makes, so a mover that
 * lost its lease (it lapsed and another mover took the move over, or a router gave the fenced
 * shard back to its owner) can change nothing more. Steps at the target run inside a transaction
 * at the source that holds the lease's row locked until the target has committed.
 *
 * Destructive steps are guarded by facts the databases record, never by what the mover remembers:
 * the target's copy is discarded only while the source has not switched to it; the source's old
 * copy is cleaned up only under its tombstone of this move; the switch takes a copy that this
 * lease checked, and only from a source this move fenced.
 */
export class ShardLease<Client extends ShardClient = ShardClient> extends SwitchingLease<Client> {
  /**
   * Takes the lease of a change of owner of `shard` to `to`: the way to change an owner by hand, step
   * by step (`moveShard` takes one itself). The map is read first. A move of the shard whose lease is
   * live refuses it (`MoveInProgressError`); one whose lease lapsed must be finished or undone first
   * (`moveShard` does).
   */
  static async take<Client extends ShardClient>(
    map: LeaseMap<Client>,
    shard: ShardRef,
    to: Database<Client>,
    options: LeaseOptions = {},
  ): Promise<ShardLease<Client>> {
    const resolved = map.registry.resolve(shard);
    if (!map.registry.databases.includes(to))
      throw new OwnershipOptionsError(["to: not a database of the map's registry"]);
    await map.refresh();
    return ShardLease.of(map, resolved, await takeLease(map, resolved, to, options));
  }

  /** The lease of what `takeLease` or `takeOverLease` (lease-take.ts) took of `shard`'s move. */
  static of<Client extends ShardClient>(
    map: LeaseMap<Client>,
    shard: ShardIdentifier,
    taken: Taken<Client>,
  ): ShardLease<Client> {
    return new ShardLease(map, shard, taken);
  }

  /**
   * Takes over a stopped move (its lease lapsed, or a router abandoned it) by compare-and-set on
   * its token: the old holder, should it wake up, is refused at its next step. The attempt, and so
   * the names of its replication objects, stay. `MoveInProgressError` when its lease is live again
   * or another mover took it over first.
   */
  static async takeOver<Client extends ShardClient>(
    map: LeaseMap<Client>,
    record: MoveRecord<Client>,
    options: LeaseOptions = {},
  ): Promise<ShardLease<Client>> {
    return new ShardLease(map, record.shard, await takeOverLease(map, record, options));
  }

  /**
   * Takes this lease's move over again, by compare-and-set on its token, once nobody holds it: its
   * lease lapsed (this mover was too slow, or stuck) or a router gave its fenced shard back to its
   * owner (`givenBack`). The new lease may then undo the move. `MoveInProgressError` when another
   * mover holds it, `EpochConflictError` when it was finished or undone meanwhile.
   */
  async retake(): Promise<{ lease: ShardLease<Client>; givenBack: boolean }> {
    const now = await readMove(raw(this.from), this.shard);
    if (!now)
      throw this.map.conflict(this.shard, "its move was finished or undone by another mover meanwhile");
    const record = { ...now, shard: this.shard, database: this.from };
    if (now.attempt !== this.attempt || isLive(record)) throw inProgress(this.map, record);
    const lease = await ShardLease.takeOver(this.map, record, { leaseMs: this.leaseMs, holder: this.holder });
    return { lease, givenBack: now.step === "abandoned" };
  }

  /**
   * Deletes the source's old copy of the shard's rows, table by table in batches of `batchSize`
   * (default 1000), as the mover: each batch only while the source's record is this move's
   * tombstone (the target owns the shard) and the lease is this mover's. The tombstone and its fence
   * stay. Returns the rows deleted per table.
   */
  async cleanup(options: { batchSize?: number } = {}): Promise<Record<string, number>> {
    const { map, shard } = this;
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
        const batch = await raw(this.from).$transaction(async (tx) => {
          await this.check(tx);
          const [own] = await tx.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
            `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
            shard.bits,
          );
          if (!(own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt)))
            throw map.conflict(
              shard,
              `${this.from.name} holds no tombstone of this move (${own?.state ?? "no record"}): its rows are not an old copy`,
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

  /**
   * Undoes the source's side of a move that did not switch: the source owns the shard again,
   * unarmed (a fence a router gave back already is left as it is). `EpochConflictError` when the
   * source switched already (its record is this move's tombstone: finish the move instead).
   */
  async unfence(): Promise<void> {
    const { map, shard } = this;
    await this.sourceStep(async (tx) => {
      await tx.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET state = 'owned', peer = NULL, attempt = NULL, "updatedAt" = now()
           WHERE shard = $1 AND state IN ('owned', 'fenced') AND (attempt IS NULL OR attempt = $2)`,
        shard.bits,
        this.attempt,
      );
      const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null }[]>(
        `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1`,
        shard.bits,
      );
      if (own?.state !== "owned" || own.peer !== null)
        throw map.conflict(
          shard,
          `${this.from.name} holds it ${own?.state ?? "with no record"}: the move cannot be undone there`,
        );
    });
    this.fencedAt = undefined; // the source takes the shard's writes again: no freeze to bound
    await this.map.refresh();
  }

  /**
   * Undoes the target's side of a move that did not switch: deletes what the target holds of the
   * shard, as the mover, table by table in batches of `batchSize` (default 10,000), then its incoming
   * record (which lifts its fence for the shard). Each batch only while the source has not switched
   * to this attempt (checked in the source's transaction that holds the lease) and the target's
   * record is incoming: a target that owns the shard, or holds a tombstone of its own, keeps its rows.
   */
  async discard(options: { batchSize?: number } = {}): Promise<void> {
    const { map, shard } = this;
    const batchSize = options.batchSize ?? 10_000;
    if (!(Number.isSafeInteger(batchSize) && batchSize >= 1))
      throw new OwnershipOptionsError([`discard: batchSize must be an integer >= 1, got ${batchSize}`]);
    /** Whether the target's rows of the shard are this move's copy to discard (throws when the source switched to it). */
    const discardable = async (tx: Raw, source: Raw) => {
      const [own] = await source.$queryRawUnsafe<{ state: string; attempt: string | null }[]>(
        `SELECT state, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`,
        shard.bits,
      );
      if (own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt))
        throw map.conflict(
          shard,
          `${this.from.name} switched it to ${this.to.name}: the copy there is the shard now`,
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
    let received = true;
    tables: for (const table of map.tables) {
      for (;;) {
        const batch = await this.targetStep(
          async (tx, source) =>
            (await discardable(tx, source)) ? remove(tx, table, ` LIMIT ${batchSize}`) : undefined,
          { change: false },
        );
        if (batch === undefined) {
          received = false; // nothing received: nothing of this move there
          break tables;
        }
        if (batch < batchSize) break;
      }
    }
    // The last rows (none, unless the mover's own sessions wrote meanwhile) and the record, together.
    if (received)
      await this.targetStep(async (tx, source) => {
        if (!(await discardable(tx, source))) return;
        for (const table of map.tables) await remove(tx, table, "");
        await tx.$executeRawUnsafe(
          `DELETE FROM "ShardOwnership" WHERE shard = $1 AND state = 'incoming'`,
          shard.bits,
        );
      });
    await this.map.refresh();
  }

  /** Brings both databases' fences in line with their records (the target's listing goes once it owns the shard). */
  async tidy(): Promise<void> {
    await this.map.changes.relist(this.to);
    await this.map.changes.relist(this.from);
  }

  /**
   * Ends the move: its record and the keys it noted are deleted (checked against the lease), and
   * renewing stops. Only once the move is finished (the source holds its tombstone) or undone (the
   * source simply owns the shard): a fenced or armed shard whose move's record is gone would never
   * be given back by a router.
   */
  async release(): Promise<void> {
    const { map, shard } = this;
    await raw(this.from).$transaction(async (tx) => {
      await this.check(tx);
      const [own] = await tx.$queryRawUnsafe<
        { state: string; peer: string | null; attempt: string | null }[]
      >(`SELECT state, peer, attempt FROM "ShardOwnership" WHERE shard = $1 FOR SHARE`, shard.bits);
      const undone = own?.state === "owned" && own.peer === null;
      const finished = own?.state === "moved" && own.attempt === nullIfEmpty(this.attempt);
      if (!undone && !finished)
        throw map.conflict(
          shard,
          `${this.from.name} holds it ${own ? `${own.state}${own.peer ? ` for ${own.peer}` : ""}` : "with no record"}: finish the move (switch) or undo it (unfence) before releasing its lease`,
        );
      await tx.$executeRawUnsafe(
        `DELETE FROM "ShardMove" WHERE shard = $1 AND attempt = $2 AND token = $3`,
        shard.bits,
        this.attempt,
        this.token,
      );
      await tx.$executeRawUnsafe(`DELETE FROM "ShardMoveChange" WHERE shard = $1`, shard.bits);
    });
    this.stop();
  }

  /**
   * Gives the lease up at once without ending the move (a mover that failed and could not undo
   * what it did): its period ends now, so routers refused by its fence give the shard back to its
   * owner at once, and the next move takes it over. Best effort.
   */
  async lapse(): Promise<void> {
    this.stop();
    // Its own deadline (a lease's period), whatever the work that failed had left: unanswered, the
    // lease lapses by itself within its period.
    const deadline = {
      at: performance.now() + this.leaseMs,
      late: () => new MoveTimeoutError(this.shard, "giving the lease up", this.leaseMs),
    };
    await bounded(deadline, () =>
      raw(this.from).$executeRawUnsafe(
        `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() WHERE shard = $1 AND attempt = $2 AND token = $3`,
        this.shard.bits,
        this.attempt,
        this.token,
      ),
    ).catch(() => {});
  }
}
