import { ShardIdentifier } from "@shardkit/id";
import {
  databaseIdentities,
  type PhysicalShard,
  type ShardClient,
  type ShardRegistry,
} from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { OwnershipOptionsError } from "./errors.js";
import { type Raw, raw } from "./map.js";
import { type OwnershipRow, placeShards, type ShardPlacement } from "./placement.js";

export interface ReadPartitionMapOptions {
  /** How long each database may take to answer. Default 2000 ms (as `PartitionMap`'s reads). */
  timeoutMs?: number;
}

/** What one database answered when the view was read. */
export type DatabaseOwnership<Client extends ShardClient = ShardClient> = {
  physical: PhysicalShard<Client>;
  /** Its registry name. */
  database: string;
  /** What it says it is (`server:port/database`); null when it did not answer that question. */
  identity: string | null;
} & (
  | {
      /** `recorded`: its `ShardOwnership` rows are `records` (none: it records no shard yet). */
      status: "recorded";
      records: OwnershipRow[];
    }
  | {
      /** `no-table`: it has no `ShardOwnership` table (the schema was not rolled out with it). */
      status: "no-table";
      records: [];
    }
  | {
      /** `unavailable`: it did not answer in time, or failed; `error` says why. */
      status: "unavailable";
      records: [];
      error: string;
    }
);

/** The partition map as the databases record it now, read without changing anything. */
export interface PartitionView<Client extends ShardClient = ShardClient> {
  /** Each database of the registry, in its order. */
  databases: DatabaseOwnership<Client>[];
  /** Each shard of the registry, in its order. */
  shards: ShardPlacement<Client>[];
  /**
   * What cannot be right about the records (what `PartitionMap.refresh` would refuse with
   * `InvalidMapError`): malformed records, records of shards or databases not in the registry,
   * and each shard's own issues.
   */
  issues: string[];
  /** One shard's placement; `OwnershipOptionsError` for a shard that is not in the registry. */
  placementOf(shard: ShardIdentifier | string): ShardPlacement<Client>;
  /** The registry name of the database with this identity (`server:port/database`); the identity itself when none has it. */
  nameOf(identity: string | null): string | null;
  /**
   * Routes the registry to the owners the records name, in this process only (`registry.assign`;
   * the databases are not touched): every shard whose owner is known, without issues, and not
   * behind the epoch the registry has seen. Returns the shards whose owner or epoch changed.
   */
  apply(): ShardIdentifier[];
}

/** The one read of a database's records: a SELECT, after a look at whether the table is there. */
const TABLE_SQL = `SELECT to_regclass(quote_ident('ShardOwnership')) IS NOT NULL AS present`;
const RECORDS_SQL = `SELECT shard, epoch, state, peer FROM "ShardOwnership" ORDER BY shard`;

/**
 * Reads the partition map from every database of `registry`, in parallel, each bounded by
 * `timeoutMs`, and places each shard where the records say it is (the rule `PartitionMap` routes
 * by). It only reads (SELECTs): unlike `PartitionMap.open`, it installs no function, records no
 * shard, attaches nothing to routing and creates no table. A database that does not answer makes
 * only its own part unknown; a database without a `ShardOwnership` table records nothing. Records
 * that cannot be right are listed in `issues`, never thrown.
 */
export async function readPartitionMap<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ReadPartitionMapOptions = {},
): Promise<PartitionView<Client>> {
  const timeoutMs = options.timeoutMs ?? 2000;
  if (!registry || !Array.isArray(registry.physical)) throw new OwnershipOptionsError(["registry: required"]);
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 1))
    throw new OwnershipOptionsError([`timeoutMs: expected a number >= 1, got ${timeoutMs}`]);
  const [identities, answers] = await Promise.all([
    databaseIdentities(registry, { timeoutMs }),
    scatter(
      registry.physical,
      async (physical): Promise<OwnershipRow[] | null> => {
        const db: Raw = raw(physical);
        const [table] = await db.$queryRawUnsafe<{ present: boolean }[]>(TABLE_SQL);
        if (!table?.present) return null;
        return db.$queryRawUnsafe<OwnershipRow[]>(RECORDS_SQL);
      },
      { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => String(p.index) },
    ),
  ]);
  const records = new Map<PhysicalShard<Client>, OwnershipRow[]>();
  const databases = answers.outcomes.map((outcome): DatabaseOwnership<Client> => {
    const physical = outcome.target;
    const about = { physical, database: physical.name, identity: identities.get(physical) ?? null };
    if (outcome.status !== "fulfilled") {
      const error = outcome.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(outcome.error);
      return { ...about, status: "unavailable", records: [], error };
    }
    records.set(physical, outcome.value ?? []);
    return outcome.value === null
      ? { ...about, status: "no-table", records: [] }
      : { ...about, status: "recorded", records: outcome.value };
  });
  const { placements, issues } = placeShards(registry, records, identities);
  for (const p of placements) issues.push(...p.issues);
  const byIdentity = new Map([...identities].map(([physical, id]) => [id, physical.name]));
  return {
    databases,
    shards: placements,
    issues,
    placementOf(ref) {
      let shard: ShardIdentifier | undefined;
      try {
        shard = ref instanceof ShardIdentifier ? ref : ShardIdentifier.parse(ref);
      } catch (error) {
        throw new OwnershipOptionsError([`shard ${JSON.stringify(ref)}: ${(error as Error).message}`]);
      }
      const found = placements.find((p) => p.shard.bits === shard.bits);
      if (!found) throw new OwnershipOptionsError([`shard ${shard.key} is not in the registry`]);
      return found;
    },
    nameOf: (identity) => (identity === null ? null : (byIdentity.get(identity) ?? identity)),
    apply() {
      const changed: ShardIdentifier[] = [];
      for (const { shard, owner, epoch, issues: problems } of placements) {
        if (owner === null || epoch === null || problems.length > 0 || !Number.isSafeInteger(epoch)) continue;
        // At or behind the epoch the registry has seen: its placement stands.
        if (epoch <= registry.epochOf(shard)) continue;
        registry.assign(shard, owner, epoch);
        changed.push(shard);
      }
      return changed;
    },
  };
}

/** An error's last non-empty line: the database's own words under a driver's wrapping. */
function lastLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error ?? "failed");
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? "failed"
  );
}
