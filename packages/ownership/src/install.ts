// Installing a partition map in its databases: shardkit's functions (each replaced only when this
// version has it otherwise) and the first record of every shard no database has recorded, each
// serialised by the database's install lock so that service instances opening at once agree.
import type { Database, ShardClient } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { DatabasesUnansweredError } from "./errors.js";
import { type Raw, raw } from "./raw.js";
import { FUNCTION_BODIES_SQL, FUNCTIONS, functionBody } from "./sql.js";

/**
 * How long a map waits for its databases, once they have answered, to install its functions and
 * record the configured placement: a lock never given, or a server that froze since, fails it.
 */
export const INSTALL_TIMEOUT_MS = 30_000;

/** The deadline of the install and recording (`INSTALL_TIMEOUT_MS` from now). */
export function installing() {
  return {
    at: performance.now() + INSTALL_TIMEOUT_MS,
    late: (database: string) =>
      new DatabasesUnansweredError("the partition map could not be installed", [
        { database, error: `no answer in ${INSTALL_TIMEOUT_MS} ms` },
      ]),
  };
}

/**
 * Serialises installing shardkit's functions and recording unrecorded shards within one database:
 * service instances opening their maps at the same moment would otherwise replace the same
 * function at once, which PostgreSQL refuses ("tuple concurrently updated").
 */
const INSTALL = `SELECT pg_advisory_xact_lock(${LOCKS.install})::text AS locked`;

/**
 * Records the configured placement of every shard no database has a record of, as owned at epoch
 * 1. Several openers at once record it once: each holds every database's install lock (taken in
 * the order of their identities, the same in every process, so two openers never wait on each
 * other in a circle) from the read of the records to its commit. A later opener reads the records
 * the first one wrote and records nothing. Nothing unrecorded (the usual start): no lock.
 */
export async function recordUnrecorded<Client extends ShardClient>(
  physical: readonly Database<Client>[],
  identityOf: (database: Database<Client>) => string,
): Promise<void> {
  const databases = [...physical].sort((a, b) => (identityOf(a) < identityOf(b) ? -1 : 1));
  const unrecorded = async (dbs: { physical: Database<Client>; db: Raw }[]) => {
    const recorded = new Set<number>();
    for (const { db } of dbs) {
      for (const row of await db.$queryRawUnsafe<{ shard: number }[]>(`SELECT shard FROM "ShardOwnership"`)) {
        recorded.add(row.shard);
      }
    }
    return dbs.flatMap(({ physical, db }) =>
      physical.shards.filter((s) => !recorded.has(s.bits)).map((shard) => ({ shard, db })),
    );
  };
  const plain = databases.map((physical) => ({ physical, db: raw(physical) }));
  if ((await unrecorded(plain)).length > 0) {
    const holding = async (i: number, held: { physical: Database<Client>; db: Raw }[]): Promise<void> => {
      if (i === databases.length) {
        for (const { shard, db } of await unrecorded(held)) {
          await db.$executeRawUnsafe(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES ($1, 1, 'owned') ON CONFLICT (shard) DO NOTHING`,
            shard.bits,
          );
        }
        return;
      }
      const physical = databases[i]!;
      await raw(physical).$transaction(
        async (tx) => {
          await tx.$queryRawUnsafe(INSTALL);
          await holding(i + 1, [...held, { physical, db: tx }]);
        },
        { timeout: 30_000, maxWait: 10_000 },
      );
    };
    await holding(0, []);
  }
}

/**
 * Installs shardkit's functions in one database, each only when the database does not hold it as
 * this version has it. Replacing a function is an update of its catalog row, which two sessions
 * cannot do at once (PostgreSQL raises "tuple concurrently updated"): installers queue on the
 * database's install lock, and each checks again once it holds it, so the ones after the first
 * find the functions in place and change nothing.
 */
export async function installFunctions(db: Raw): Promise<void> {
  const stale = async (reader: Raw) => {
    const rows = await reader.$queryRawUnsafe<{ name: string; body: string }[]>(
      FUNCTION_BODIES_SQL,
      FUNCTIONS.map((f) => f.name),
    );
    return FUNCTIONS.filter((f) => !rows.some((r) => r.name === f.name && r.body === functionBody(f.create)));
  };
  if ((await stale(db)).length === 0) return;
  await db.$transaction(
    async (tx) => {
      await tx.$queryRawUnsafe(INSTALL);
      for (const f of await stale(tx)) await tx.$executeRawUnsafe(f.create);
    },
    { timeout: 30_000, maxWait: 10_000 },
  );
}
