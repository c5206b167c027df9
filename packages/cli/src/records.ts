// Read-only views of what each database records, for `status` and `move --dry-run`. They only
// SELECT: opening a PartitionMap (`@shardkit/ownership`) would install its functions and record
// unrecorded shards, which a command that only looks must not do.
import type { ShardIdentifier } from "@shardkit/id";
import { databaseIdentities, type PhysicalShard } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import type { OpenedConfig, RawClient } from "./config.js";
import { oneLine } from "./format.js";

/** One row of a database's `ShardOwnership` (the table of `@shardkit/ownership`'s schema). */
export interface OwnershipRecord {
  shard: number;
  epoch: number;
  state: string;
  /** A database identity (`<server>:<port>/<database>`) or null. */
  peer: string | null;
}

/** What one database answered: its records, `null` when it has no `ShardOwnership` table, or why it did not answer. */
export type RecordsOf =
  | { physical: PhysicalShard<RawClient>; records: OwnershipRecord[] | null; latencyMs: number }
  | { physical: PhysicalShard<RawClient>; error: string };

/** True when a database error says a table (relation) does not exist. */
export function isMissingTable(error: unknown): boolean {
  const text = `${(error as { code?: unknown })?.code ?? ""} ${(error as Error)?.message ?? ""} ${JSON.stringify((error as { meta?: unknown })?.meta ?? {})}`;
  return /42P01|relation "?[\w."]+"? does not exist|TableDoesNotExist/.test(text);
}

/** Every database's ownership records, in parallel, each bounded by `timeoutMs`. */
export async function readRecords(opened: OpenedConfig, timeoutMs: number): Promise<RecordsOf[]> {
  const result = await scatter(
    opened.registry.physical,
    async (physical) => {
      const started = performance.now();
      try {
        const records = await physical.client.$queryRawUnsafe<OwnershipRecord[]>(
          `SELECT shard, epoch, state, peer FROM "ShardOwnership" ORDER BY shard`,
        );
        return { records, latencyMs: performance.now() - started };
      } catch (error) {
        if (isMissingTable(error)) return { records: null, latencyMs: performance.now() - started };
        throw error;
      }
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => String(p.index) },
  );
  return result.outcomes.map((o) =>
    o.status === "fulfilled"
      ? { physical: o.target, ...o.value }
      : {
          physical: o.target,
          error: o.reason === "timeout" ? `no answer in ${timeoutMs} ms` : oneLine(o.error),
        },
  );
}

/** Where the records say a shard is. */
export interface Placement {
  /** The database that owns it (or holds it fenced, between owners), by the records; null when none says. */
  owner: PhysicalShard<RawClient> | null;
  epoch: number | null;
  /**
   * `owned`, `fenced` (between owners: writes wait), `unrecorded` (no database has a record: no
   * partition map was opened yet, so the configuration's placement holds), `unknown` (the database
   * the configuration names did not answer and no other has a record).
   */
  state: "owned" | "fenced" | "unrecorded" | "unknown";
  /** The database the shard is moving to (armed or fenced with a peer), by name or identity. */
  movingTo: string | null;
  /** Every record of the shard, per database. */
  records: { database: string; epoch: number; state: string; peer: string | null }[];
}

/**
 * The owner of each shard by the records: the database whose record says owned (or fenced) at the
 * highest epoch. Tombstones (`moved`) and incoming records only name where it went or comes from.
 */
export function placementOf(
  shard: ShardIdentifier,
  configured: PhysicalShard<RawClient>,
  all: readonly RecordsOf[],
  nameOf: (identity: string | null) => string | null,
): Placement {
  const records: Placement["records"] = [];
  let best: { physical: PhysicalShard<RawClient>; record: OwnershipRecord } | undefined;
  for (const answer of all) {
    if (!("records" in answer) || answer.records === null) continue;
    for (const record of answer.records) {
      if (record.shard !== shard.bits) continue;
      records.push({
        database: answer.physical.name,
        epoch: record.epoch,
        state: record.state,
        peer: nameOf(record.peer),
      });
      if (
        (record.state === "owned" || record.state === "fenced") &&
        (!best || record.epoch > best.record.epoch)
      )
        best = { physical: answer.physical, record };
    }
  }
  if (best) {
    return {
      owner: best.physical,
      epoch: best.record.epoch,
      state: best.record.state as "owned" | "fenced",
      movingTo: nameOf(best.record.peer),
      records,
    };
  }
  const configuredAnswered = all.some((a) => a.physical === configured && "records" in a);
  return {
    owner: null,
    epoch: records.length > 0 ? Math.max(...records.map((r) => r.epoch)) : null,
    state: configuredAnswered ? "unrecorded" : "unknown",
    movingTo: null,
    records,
  };
}

/** Each database's identity (`<server system id>:<port>/<database>`) and a way back from identity to name. */
export async function identities(opened: OpenedConfig, timeoutMs: number) {
  const byPhysical = await databaseIdentities(opened.registry, { timeoutMs });
  const byIdentity = new Map<string, string>();
  for (const [physical, identity] of byPhysical) byIdentity.set(identity, physical.name);
  return {
    byPhysical,
    nameOf: (identity: string | null) => (identity === null ? null : (byIdentity.get(identity) ?? identity)),
  };
}

/**
 * Reads the records and places each shard where they say it is now (`registry.assign`), so that
 * what runs next (outbox lag, health, redrive) sees shards that moved since the configuration was
 * written at their current owner. Returns each shard's placement and where the configuration put it.
 */
export async function applyRecords(opened: OpenedConfig, timeoutMs: number) {
  const [ids, records] = await Promise.all([identities(opened, timeoutMs), readRecords(opened, timeoutMs)]);
  const { registry } = opened;
  const placements = registry.shards.map((shard) => {
    const configured = registry.physicalOf(shard);
    const placement = placementOf(shard, configured, records, ids.nameOf);
    if (placement.owner && placement.epoch !== null && placement.owner !== configured)
      registry.assign(shard, placement.owner, placement.epoch);
    return { shard, configured, placement };
  });
  return { ids, records, placements };
}
