// What the databases record of a move: its lease row in the source's `ShardMove`, read from every
// database at once, how a move in progress is reported, and the replication objects a move leaves
// on a database (read by `readPartitionMap`; made and dropped by the mover, replication.ts).
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import type { OwnershipChanges } from "./changes.js";
import { type EpochConflictError, MoveInProgressError } from "./errors.js";
import { lastLine, type Raw, raw } from "./raw.js";
import type { FencedTable } from "./sql.js";

/** A move's record (its lease) as a database holds it: on the database the shard moves from. */
export interface MoveRecord<Client extends ShardClient = ShardClient> {
  /** The database holding it: the move's source. */
  database: Database<Client>;
  shard: ShardIdentifier;
  /** The database it moves to (its identity, `server:port/database`). */
  target: string;
  /** `copying`, `fenced`, `switched`, or `abandoned` (a router gave the fenced shard back to its owner). */
  step: string;
  /** The move attempt: its replication objects are named after it. */
  attempt: string;
  /** The fencing token: grows by one each time the move is taken over. */
  token: number;
  holder: string;
  /** Milliseconds until the lease lapses, by the database's clock (zero or less: lapsed). */
  expiresInMs: number;
  startedAt: Date;
}

/** Whether a move's lease is held: not lapsed, not abandoned. */
export function isLive(record: Pick<MoveRecord, "step" | "expiresInMs">): boolean {
  return record.step !== "abandoned" && record.expiresInMs > 0;
}

export const MOVE_COLUMNS = `shard, target, step, attempt, token, holder, "startedAt",
  (extract(epoch FROM ("expiresAt" - clock_timestamp())) * 1000)::float8 AS "expiresInMs"`;

/** A move's record as a database returns it (its shard as bits). */
export type MoveRow = Omit<MoveRecord, "database" | "shard"> & { shard: number };

/** `db`'s record of a move of `shard` (on the move's source), if any. */
export async function readMove(db: Raw, shard: ShardIdentifier): Promise<MoveRow | undefined> {
  const [row] = await db.$queryRawUnsafe<MoveRow[]>(
    `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
    shard.bits,
  );
  return row;
}

/**
 * Every database's record of a move of `shard` (normally one at most: on the move's source), read
 * at once, each database bounded by `timeoutMs`. A database without the table records none.
 */
export async function findMoves<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  shard: ShardIdentifier,
  timeoutMs: number,
): Promise<{
  found: MoveRecord<Client>[];
  unanswered: { physical: Database<Client>; error: string }[];
}> {
  const result = await scatter(
    registry.databases,
    async (physical) => {
      try {
        return await raw(physical).$queryRawUnsafe<MoveRow[]>(
          `SELECT ${MOVE_COLUMNS} FROM "ShardMove" WHERE shard = $1`,
          shard.bits,
        );
      } catch (error) {
        if (/42P01|does not exist/.test(`${(error as { code?: unknown }).code} ${(error as Error).message}`))
          return [];
        throw error;
      }
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => p.name },
  );
  const found: MoveRecord<Client>[] = [];
  for (const outcome of result.outcomes) {
    if (outcome.status !== "fulfilled") continue;
    for (const row of outcome.value) found.push({ ...row, shard, database: outcome.target });
  }
  const unanswered = result.missing.map((m) => ({
    physical: m.target,
    error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
  }));
  return { found, unanswered };
}

/** What a lease needs of the partition map (a `PartitionMap`). */
export interface LeaseMap<Client extends ShardClient> {
  readonly registry: ShardRegistry<Client>;
  readonly tables: readonly FencedTable[];
  readonly changes: OwnershipChanges<Client>;
  identityOf(physical: Database<Client>): string;
  refresh(): Promise<void>;
  /** Counts a conflict and returns its error. */
  conflict(shard: ShardIdentifier, message: string): EpochConflictError;
}

/** The replication objects of a move attempt: `shardkit_move_<bits>_<first 12 hex digits of the attempt>`. */
export function moveNames(
  shard: ShardIdentifier,
  attempt: string,
): { publication: string; subscription: string } {
  const name = `shardkit_move_${shard.bits}${attempt ? `_${attempt.slice(0, 12)}` : ""}`;
  return { publication: name, subscription: name };
}

/** The error that refuses a move while `record`'s lease is live. */
export function inProgress<Client extends ShardClient>(map: LeaseMap<Client>, record: MoveRecord<Client>) {
  return new MoveInProgressError(record.shard, {
    holder: record.holder || "an earlier version of shardkit",
    step: record.step,
    to: nameOfIdentity(map, record.target),
    expiresInMs: Math.round(record.expiresInMs),
    database: record.database.name,
  });
}

/** The registry name of the database with this identity; the identity itself when none has it. */
export function nameOfIdentity<Client extends ShardClient>(
  map: Pick<LeaseMap<Client>, "registry" | "identityOf">,
  identity: string,
): string {
  for (const p of map.registry.databases) {
    try {
      if (map.identityOf(p) === identity) return p.name;
    } catch {}
  }
  return identity;
}

/** A move's replication object found on a database (`shardkit status` and `doctor` report those no live move holds). */
export interface MoveObject {
  kind: "slot" | "publication" | "subscription";
  name: string;
  /** The logical shard its name carries (`shardkit_move_<bits>...`). */
  shard: number;
  /** Slots: whether a subscriber is connected, and the WAL it holds on its server (bytes). */
  active?: boolean;
  walBytes?: number;
}

/** The move objects (`shardkit_move_*`) of a database: its slots, publications and subscriptions. */
export async function moveObjects(db: Raw): Promise<MoveObject[]> {
  const [slots, publications, subscriptions] = await Promise.all([
    db.$queryRawUnsafe<{ name: string; active: boolean; wal: number | null }[]>(
      `SELECT slot_name::text AS name, active,
         pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 AS wal
       FROM pg_replication_slots WHERE database = current_database() AND slot_name LIKE 'shardkit\\_move\\_%'`,
    ),
    db.$queryRawUnsafe<{ name: string }[]>(
      `SELECT pubname::text AS name FROM pg_publication WHERE pubname LIKE 'shardkit\\_move\\_%'`,
    ),
    db.$queryRawUnsafe<{ name: string }[]>(
      `SELECT subname::text AS name FROM pg_subscription
       WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND subname LIKE 'shardkit\\_move\\_%'`,
    ),
  ]);
  const shardOf = (name: string) => Number(name.split("_")[2]);
  return [
    ...slots.map((s) => ({
      kind: "slot" as const,
      name: s.name,
      shard: shardOf(s.name),
      active: s.active,
      walBytes: Math.max(0, Math.round(s.wal ?? 0)),
    })),
    ...publications.map((p) => ({ kind: "publication" as const, name: p.name, shard: shardOf(p.name) })),
    ...subscriptions.map((s) => ({ kind: "subscription" as const, name: s.name, shard: shardOf(s.name) })),
  ];
}
