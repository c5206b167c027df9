// Taking a move's lease: its options, a new move's lease by compare-and-set on the owner's records,
// and a stopped move taken over by compare-and-set on its fencing token. `ShardLease.take` and
// `ShardLease.takeOver` (lease.ts) make the lease of what these take.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { gaveWay } from "./changes.js";
import { OwnershipOptionsError } from "./errors.js";
import { raw } from "./raw.js";
import { inProgress, isLive, type LeaseMap, type MoveRecord, readMove } from "./records.js";

/** How long a move's lease lasts unless renewed, by default: a mover that dies holds its shard at most this long. */
export const DEFAULT_LEASE_MS = 10_000;

export interface LeaseOptions {
  /**
   * How long the lease lasts unless renewed (the mover renews it three times per period, and every
   * step renews it). A mover that dies, hangs or loses its connections holds the shard at most this
   * long: then routers give a fenced shard back to its owner, and another move may take over.
   * Default 10 000 ms.
   */
  leaseMs?: number;
  /** Who holds the lease, as a second mover is told. Default: host, process id and a random part. */
  holder?: string;
}

/** What a lease was taken as: the move it holds, under which token, by whom, for how long. */
export interface Taken<Client extends ShardClient> {
  from: Database<Client>;
  to: Database<Client>;
  attempt: string;
  token: number;
  holder: string;
  leaseMs: number;
}

/**
 * Records a new move of `shard` to `to` on its owner (in the registry's layout, which the caller
 * has just refreshed), by compare-and-set: only while the owner simply owns the shard (not armed,
 * fenced or moved) and no move of it is recorded there (see `ShardLease.take`).
 */
export async function takeLease<Client extends ShardClient>(
  map: LeaseMap<Client>,
  shard: ShardIdentifier,
  to: Database<Client>,
  options: LeaseOptions,
): Promise<Taken<Client>> {
  const { leaseMs, holder } = leaseSettings(options);
  const from = map.registry.databaseOf(shard);
  if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);
  const attempt = randomUUID().replaceAll("-", "");
  const target = map.identityOf(to);
  await map.changes.locked(from, async (tx) => {
    const [own] = await tx.$queryRawUnsafe<{ state: string; peer: string | null }[]>(
      `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1 FOR UPDATE`,
      shard.bits,
    );
    if (own?.state !== "owned" || own.peer !== null) {
      throw map.conflict(
        shard,
        `${from.name} does not simply own it (${own ? `${own.state}${own.peer ? `, moving to ${own.peer}` : ""}` : "no record"}): no move can start from there`,
      );
    }
    const taken = await tx.$queryRawUnsafe<{ shard: number }[]>(
      `INSERT INTO "ShardMove" (shard, target, step, attempt, token, holder, "expiresAt", "startedAt", "updatedAt")
         VALUES ($1, $2, 'copying', $3, 1, $4, clock_timestamp() + $5::float8 * interval '1 millisecond', now(), now())
         ON CONFLICT (shard) DO NOTHING RETURNING shard`,
      shard.bits,
      target,
      attempt,
      holder,
      leaseMs,
    );
    if (taken.length === 0) {
      const row = await readMove(tx, shard);
      throw inProgress(map, { ...row!, shard, database: from });
    }
  });
  return { from, to, attempt, token: 1, holder, leaseMs };
}

/**
 * Takes over a stopped move by compare-and-set on its token (see `ShardLease.takeOver`): the
 * attempt, and so the names of its replication objects, stay.
 */
export async function takeOverLease<Client extends ShardClient>(
  map: LeaseMap<Client>,
  record: MoveRecord<Client>,
  options: LeaseOptions,
): Promise<Taken<Client>> {
  const { leaseMs, holder } = leaseSettings(options);
  const to = map.registry.databases.find((p) => {
    try {
      return map.identityOf(p) === record.target;
    } catch {
      return false;
    }
  });
  if (!to)
    throw new OwnershipOptionsError([
      `a stopped move of shard ${record.shard.key} on ${record.database.name} names ${record.target}, which is not a database of the registry (or has not answered)`,
    ]);
  // The old holder's transactions end within its lease (see `check`): waiting longer for its row is
  // never needed. A router that gave the shard back meanwhile grew the token: taken over from there.
  let current = record;
  for (let round = 0; round < 5; round++) {
    const taken = await casTakeOver(current, holder, leaseMs);
    if (taken !== undefined)
      return { from: record.database, to, attempt: record.attempt, token: taken, holder, leaseMs };
    const now = await readMove(raw(record.database), record.shard);
    if (!now)
      throw map.conflict(record.shard, "its stopped move was finished or undone by another mover meanwhile");
    current = { ...now, shard: record.shard, database: record.database };
    if (isLive(current) || current.attempt !== record.attempt) throw inProgress(map, current);
  }
  throw inProgress(map, current);
}

/**
 * The compare-and-set of a takeover: the new token, or undefined when the record is not as read. An
 * abandoned move's step becomes `resume`: it is held again, and nobody else takes it while its lease runs.
 */
async function casTakeOver<Client extends ShardClient>(
  record: MoveRecord<Client>,
  holder: string,
  leaseMs: number,
): Promise<number | undefined> {
  const [row] = await raw(record.database)
    .$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${Math.max(leaseMs, 1000)}ms'`);
      return tx.$queryRawUnsafe<{ token: number }[]>(
        `UPDATE "ShardMove" SET token = token + 1, holder = $4,
         step = CASE WHEN step = 'abandoned' THEN 'resume' ELSE step END,
         "expiresAt" = clock_timestamp() + $5::float8 * interval '1 millisecond', "updatedAt" = clock_timestamp()
       WHERE shard = $1 AND attempt = $2 AND token = $3 AND ("expiresAt" < clock_timestamp() OR step = 'abandoned')
       RETURNING token`,
        record.shard.bits,
        record.attempt,
        record.token,
        holder,
        leaseMs,
      );
    })
    .catch((error: unknown) => {
      if (gaveWay(error)) return []; // its row stayed locked (a holder that is not stopped after all): read again
      throw error;
    });
  return row?.token;
}

function leaseSettings(options: LeaseOptions): { leaseMs: number; holder: string } {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const issues: string[] = [];
  if (!(Number.isSafeInteger(leaseMs) && leaseMs >= 300))
    issues.push(`leaseMs: expected an integer >= 300, got ${leaseMs}`);
  if (options.holder !== undefined && (typeof options.holder !== "string" || options.holder === ""))
    issues.push("holder: expected a non-empty string");
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  return { leaseMs, holder: options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}` };
}
