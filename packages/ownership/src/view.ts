import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRef, ShardRegistry } from "@shardkit/prisma";
import { databaseIdentities, toShard } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { OwnershipOptionsError } from "./errors.js";
import { type OwnershipRow, resolveOwners, type ShardOwner } from "./owners.js";
import { lastLine, type Raw, raw } from "./raw.js";
import { isLive, type MoveRow as LeaseMoveRow, type MoveObject, moveNames, moveObjects } from "./records.js";

export interface ReadPartitionMapOptions {
  /** How long each database may take to answer. Default 5000 ms (as `PartitionMap`'s reads). */
  timeoutMs?: number;
}

/** A move's record (its lease) as the view read it, on the move's source. */
export interface MoveView {
  shard: ShardIdentifier;
  /** The database it moves to, by registry name (its identity when no database of the registry has it). */
  to: string;
  /** `copying`, `fenced`, `switched`, or `abandoned` (a router gave its fenced shard back to its owner). */
  step: string;
  holder: string;
  attempt: string;
  token: number;
  /** Milliseconds until its lease lapses, by the database's clock (zero or less: lapsed). */
  expiresInMs: number;
  /** Whether its lease is held (not lapsed, not abandoned): otherwise the move stopped, and the next move of the shard takes it over. */
  live: boolean;
}

/** What one database answered when the view was read. */
export type DatabaseOwnership<Client extends ShardClient = ShardClient> = {
  physical: Database<Client>;
  /** Its registry name. */
  database: string;
  /** What it says it is (`server:port/database`); null when it did not answer that question. */
  identity: string | null;
  /** The moves recorded on it (it is their source), live or stopped. */
  moves: MoveView[];
  /** The moves' replication objects on it (`shardkit_move_*` slots, publications, subscriptions). */
  replication: MoveObject[];
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
      /** True when it did not answer within the read's `timeoutMs` (slow or frozen, not known to be down). */
      timedOut: boolean;
    }
);

/** A replication object of a move that no live move holds: it holds WAL on its server (slots) until dropped. */
export interface MoveLeftover extends MoveObject {
  /** The database it is on, by registry name. */
  database: string;
}

/** The partition map as the databases record it now, read without changing anything. */
export interface PartitionView<Client extends ShardClient = ShardClient> {
  /** Each database of the registry, in its order. */
  databases: DatabaseOwnership<Client>[];
  /** Each shard of the registry, in its order. */
  shards: ShardOwner<Client>[];
  /**
   * What cannot be right about the records (what `PartitionMap.refresh` would refuse with
   * `InvalidMapError`): malformed records, records of shards or databases not in the registry,
   * and each shard's own issues.
   */
  issues: string[];
  /** Moves whose lease lapsed or was abandoned: the next move of the shard takes them over (finishes or undoes them). */
  stopped: (MoveView & { database: string })[];
  /**
   * Replication objects of moves (`shardkit_move_*`) that no live move holds: left by a mover that
   * died or a subscription whose source was down. A slot among them holds WAL on its server (a
   * disk-filling hazard) until the next move of its shard, or a person, drops it.
   */
  leftovers: MoveLeftover[];
  /** One shard's placement; `OwnershipOptionsError` for a shard that is not in the registry. */
  ownerOf(shard: ShardRef): ShardOwner<Client>;
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
const TABLE_SQL = `SELECT to_regclass(quote_ident('ShardOwnership')) IS NOT NULL AS present,
  to_regclass(quote_ident('ShardMove')) IS NOT NULL AS moves`;
type MoveRow = Omit<LeaseMoveRow, "startedAt">;
const RECORDS_SQL = `SELECT shard, epoch, state, peer, to_jsonb(o) ->> 'attempt' AS attempt FROM "ShardOwnership" o ORDER BY shard`;
/** The moves recorded on a database; a database rolled out with an older schema lacks the lease's columns. */
const MOVES_SQL = `SELECT shard, target, step, coalesce(to_jsonb(m) ->> 'attempt', '') AS attempt,
    coalesce((to_jsonb(m) ->> 'token')::int, 1) AS token, coalesce(to_jsonb(m) ->> 'holder', '') AS holder,
    coalesce(extract(epoch FROM ((to_jsonb(m) ->> 'expiresAt')::timestamptz - clock_timestamp())) * 1000, 0)::float8 AS "expiresInMs"
  FROM "ShardMove" m ORDER BY shard`;

/**
 * Reads the partition map from every database of `registry`, in parallel, each bounded by
 * `timeoutMs`, and places each shard where the records say it is (the rule `PartitionMap` routes
 * by). It only reads (SELECTs): unlike `PartitionMap.open`, it installs no function, records no
 * shard, attaches nothing to routing and creates no table. A database that does not answer makes
 * only its own part unknown; a database without a `ShardOwnership` table records nothing. Records
 * that cannot be right are listed in `issues`, never thrown.
 * Longer than 80 lines: every database asked once, then the report built from the one answer set.
 */
export async function readPartitionMap<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ReadPartitionMapOptions = {},
): Promise<PartitionView<Client>> {
  const timeoutMs = options.timeoutMs ?? 2000;
  if (!registry || !Array.isArray(registry.databases))
    throw new OwnershipOptionsError(["registry: required"]);
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 1))
    throw new OwnershipOptionsError([`timeoutMs: expected a number >= 1, got ${timeoutMs}`]);
  const [identities, answers] = await Promise.all([
    databaseIdentities(registry, { timeoutMs }),
    scatter(
      registry.databases,
      async (physical) => {
        const db: Raw = raw(physical);
        const [[table], replication] = await Promise.all([
          db.$queryRawUnsafe<{ present: boolean; moves: boolean }[]>(TABLE_SQL),
          moveObjects(db).catch(() => [] as MoveObject[]), // a server without logical replication (PGlite)
        ]);
        if (!table?.present) return { records: null, moves: [], replication };
        const [records, moves] = await Promise.all([
          db.$queryRawUnsafe<OwnershipRow[]>(RECORDS_SQL),
          table.moves ? db.$queryRawUnsafe<MoveRow[]>(MOVES_SQL) : Promise.resolve([] as MoveRow[]),
        ]);
        return { records, moves, replication };
      },
      { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => String(p.index) },
    ),
  ]);
  const records = new Map<Database<Client>, OwnershipRow[]>();
  const byIdentity = new Map([...identities].map(([physical, id]) => [id, physical.name]));
  const nameOf = (identity: string) => byIdentity.get(identity) ?? identity;
  const databases = answers.outcomes.map((outcome): DatabaseOwnership<Client> => {
    const physical = outcome.target;
    const about = { physical, database: physical.name, identity: identities.get(physical) ?? null };
    if (outcome.status !== "fulfilled") {
      const timedOut = outcome.reason === "timeout";
      const error = timedOut ? `no answer in ${timeoutMs} ms` : lastLine(outcome.error);
      return { ...about, moves: [], replication: [], status: "unavailable", records: [], error, timedOut };
    }
    const { value } = outcome;
    const moves = value.moves.map(
      (m): MoveView => ({
        shard: ShardIdentifier.fromBits(m.shard),
        to: nameOf(m.target),
        step: m.step,
        holder: m.holder,
        attempt: m.attempt,
        token: m.token,
        expiresInMs: Math.round(m.expiresInMs),
        live: isLive(m),
      }),
    );
    const seen = { ...about, moves, replication: value.replication };
    records.set(physical, value.records ?? []);
    return value.records === null
      ? { ...seen, status: "no-table", records: [] }
      : { ...seen, status: "recorded", records: value.records };
  });
  const { placements, issues } = resolveOwners(registry, records, identities);
  for (const p of placements) issues.push(...p.issues);
  // A shard no database records, while its database records others: a map was opened over these
  // databases (it records every shard), so its record was deleted, or the shard is new to the
  // configuration (the next map opened records it). Routers refuse its calls until then.
  for (const p of placements) {
    if (p.state !== "unrecorded") continue;
    const own = records.get(p.configured) ?? [];
    if (own.length > 0)
      issues.push(
        `shard ${p.shard.key}: no database records it, though ${p.configured.name} records other shards: its record was deleted, or the shard is new to the configuration (opening a partition map records it)`,
      );
  }
  const stopped = databases.flatMap((d) =>
    d.moves.filter((m) => !m.live).map((m) => ({ ...m, database: d.database })),
  );
  // An object is held by a live move of its shard whose attempt names it. A slot or a publication is
  // on its move's source, whose records were read with it; a subscription is on the target, and
  // while some database did not answer, the move holding it may be recorded there: not judged then.
  const held = new Set(
    databases.flatMap((d) =>
      d.moves.filter((m) => m.live).map((m) => moveNames(m.shard, m.attempt).subscription),
    ),
  );
  const allAnswered = databases.every((d) => d.status !== "unavailable");
  const leftovers = databases.flatMap((d) =>
    d.replication
      .filter((o) => !held.has(o.name) && (o.kind !== "subscription" || allAnswered))
      .map((o) => ({ ...o, database: d.database })),
  );
  return {
    databases,
    shards: placements,
    issues,
    stopped,
    leftovers,
    ownerOf(ref) {
      let shard: ShardIdentifier | undefined;
      try {
        shard = toShard(ref);
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
