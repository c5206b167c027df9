import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";

/** One row of a database's `ShardOwnership`, as stored (`peer`: a database identity, `server:port/database`). */
export interface OwnershipRow {
  /** The shard's bits (`group << 6 | member`). */
  shard: number;
  epoch: number;
  state: string;
  peer: string | null;
  /** The move attempt that armed, fenced, moved away or copies in the shard here (null: none; absent before this column existed). */
  attempt?: string | null;
}

/** A shard's state in one database's `ShardOwnership`. */
export type OwnershipState = "owned" | "fenced" | "moved" | "incoming";
export const STATES: readonly string[] = ["owned", "fenced", "moved", "incoming"];

/** One database's record of a shard. */
export interface ShardRecord {
  /** The database holding the record (its registry name). */
  database: string;
  epoch: number;
  state: string;
  /** The database the record names (where it went, comes from or is moving to), by registry name; its identity when no database of the registry has it. */
  peer: string | null;
}

/** Where the records say a shard is. */
export interface ShardOwner<Client extends ShardClient = ShardClient> {
  shard: ShardIdentifier;
  /** Where the registry sent the shard when the records were read (its configuration, unless assigned since). */
  configured: Database<Client>;
  /**
   * The database that owns it by the records (or holds it fenced, between owners; or, when its
   * own record was not read, the one a tombstone names). Null when no record says.
   */
  owner: Database<Client> | null;
  /** The owner's epoch; without an owner, the highest epoch of any record of the shard (null: none). */
  epoch: number | null;
  /**
   * `owned`; `fenced` (between owners: its writes wait for the switch); `unrecorded` (no database
   * has a record of it, and the one the registry sends it to answered: no partition map was opened
   * yet, the registry's layout holds); `unknown` (the records read do not say: the owner's
   * database did not answer; `owner` is set when a tombstone names where the shard went).
   */
  state: "owned" | "fenced" | "unrecorded" | "unknown";
  /** The database it is being moved to (its owner's record is armed or fenced for it), by name. */
  movingTo: string | null;
  /** Every record of the shard, in the registry's order of databases. */
  records: ShardRecord[];
  /** What cannot be right about its records (two owners, an owner behind another record's epoch). */
  issues: string[];
}

/**
 * Where each of the registry's shards is by the records read from its databases (`records`: the
 * rows of every database whose records are known; a database without a `ShardOwnership` table
 * has none), with `identities` to name the databases records point to. Pure: the one placement
 * rule of the package, used by `PartitionMap` (which refuses the calls of a shard with issues) and by
 * `readPartitionMap` (which reports them).
 * Longer than 80 lines: the one placement rule, each case beside the others it must agree with.
 */
export function resolveOwners<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  records: ReadonlyMap<Database<Client>, readonly OwnershipRow[]>,
  identities: ReadonlyMap<Database<Client>, string>,
): { placements: ShardOwner<Client>[]; issues: string[] } {
  const issues: string[] = [];
  const known = new Set(identities.values());
  const byIdentity = new Map([...identities].map(([physical, id]) => [id, physical]));
  const nameOf = (peer: string | null) => (peer === null ? null : (byIdentity.get(peer)?.name ?? peer));
  const byShard = new Map<number, { physical: Database<Client>; row: OwnershipRow }[]>();
  /** What is wrong with the records of a registered shard, by its bits (each placement carries its own). */
  const rowIssues = new Map<number, string[]>();
  // In the registry's order of databases, whatever the order of `records`.
  for (const physical of registry.databases) {
    for (const row of records.get(physical) ?? []) {
      const where = `${physical.name}: shard ${row.shard}`;
      if (!Number.isInteger(row.shard) || row.shard < 0 || row.shard >= 1 << 14) {
        issues.push(`${where}: not a shard (expected 0..16383)`);
        continue;
      }
      const shard = ShardIdentifier.fromBits(row.shard);
      if (!registry.has(shard)) {
        issues.push(`${physical.name}: shard ${shard.key} is not in the registry`);
        continue;
      }
      const found: string[] = [];
      if (!Number.isSafeInteger(row.epoch) || row.epoch < 1) {
        found.push(
          `${physical.name}: shard ${shard.key}: epoch ${JSON.stringify(row.epoch)} is not an integer >= 1`,
        );
      }
      if (!STATES.includes(row.state)) {
        found.push(
          `${physical.name}: shard ${shard.key}: state ${JSON.stringify(row.state)} is not one of ${STATES.join(", ")}`,
        );
      }
      if (row.peer !== null && known.size === registry.databases.length && !known.has(row.peer)) {
        found.push(
          `${physical.name}: shard ${shard.key}: names database ${row.peer}, which is not in the registry`,
        );
      }
      if (found.length > 0) rowIssues.set(row.shard, [...(rowIssues.get(row.shard) ?? []), ...found]);
      byShard.set(row.shard, [...(byShard.get(row.shard) ?? []), { physical, row }]);
    }
  }
  const placements = registry.shards.map((shard): ShardOwner<Client> => {
    const configured = registry.databaseOf(shard);
    const held = byShard.get(shard.bits) ?? [];
    const placement: ShardOwner<Client> = {
      shard,
      configured,
      owner: null,
      epoch: null,
      state: held.length === 0 && records.has(configured) ? "unrecorded" : "unknown",
      movingTo: null,
      records: held.map(({ physical, row }) => ({
        database: physical.name,
        epoch: row.epoch,
        state: row.state,
        peer: nameOf(row.peer),
      })),
      issues: [...(rowIssues.get(shard.bits) ?? [])],
    };
    if (held.length === 0) return placement;
    const top = Math.max(...held.map((h) => h.row.epoch));
    placement.epoch = top;
    const owners = held.filter((h) => h.row.state === "owned");
    if (owners.length > 1) {
      placement.issues.push(
        `shard ${shard.key} has two owners: ${owners.map((o) => `${o.physical.name} (epoch ${o.row.epoch})`).join(" and ")}`,
      );
    }
    // The owner (the newest, should there be two); else the database that fenced it (writes are
    // refused there until the switch); else, from a tombstone, the database it moved to (whose own
    // record was not read).
    const owner =
      owners.reduce<(typeof owners)[number] | undefined>(
        (best, h) => (!best || h.row.epoch > best.row.epoch ? h : best),
        undefined,
      ) ?? held.find((h) => h.row.state === "fenced" && h.row.epoch === top);
    if (owner) {
      if (owner.row.epoch < top) {
        placement.issues.push(
          `shard ${shard.key}: owner ${owner.physical.name} is at epoch ${owner.row.epoch}, behind epoch ${top} elsewhere`,
        );
      }
      placement.owner = owner.physical;
      placement.epoch = owner.row.epoch;
      placement.state = owner.row.state as "owned" | "fenced";
      placement.movingTo = nameOf(owner.row.peer);
      return placement;
    }
    const tombstone = held.find((h) => h.row.state === "moved" && h.row.epoch === top);
    const target = tombstone?.row.peer ? byIdentity.get(tombstone.row.peer) : undefined;
    if (target) {
      placement.owner = target;
      // The database the tombstone names was read and holds nothing of the shard: its owner record is gone.
      if (records.has(target) && !held.some((h) => h.physical === target))
        placement.issues.push(
          `shard ${shard.key}: ${tombstone!.physical.name}'s tombstone says ${target.name} owns it at epoch ${top}, but ${target.name} has no record of it (deleted?)`,
        );
    }
    return placement;
  });
  return { placements, issues };
}
