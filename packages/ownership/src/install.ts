// Installing a partition map in its databases: shardkit's functions (each replaced only when this
// version has it otherwise) and the first record of every shard no database has recorded, each
// serialised by the database's install lock so that service instances opening at once agree.
// `MapInstall` is what one map installed, at open and as databases that were down answer.
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { DatabasesUnansweredError, OwnershipOptionsError } from "./errors.js";
import { bounded, type Raw, raw } from "./raw.js";
import {
  type FencedTable,
  FUNCTION_BODIES_SQL,
  FUNCTIONS,
  functionBody,
  ownershipSchemaIssues,
} from "./sql.js";
import { resolveTables } from "./tables.js";

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

/** What one partition map installed in its databases, and installs as the ones that were down answer. */
export class MapInstall<Client extends ShardClient> {
  /** Databases whose functions are installed as this version has them. */
  private readonly installed = new Set<Database<Client>>();
  /** Whether every shard has been recorded (every database answered at once, at open or later). */
  recorded = false;

  constructor(
    private readonly registry: ShardRegistry<Client>,
    /** The map: what each database says it is. */
    private readonly map: { identityOf(database: Database<Client>): string },
  ) {}

  /**
   * The open's install, in the databases that told their `identities`: checks that they have
   * @shardkit/ownership's schema, finds which of `@shardkit/prisma`'s tables they have, installs
   * shardkit's functions in each, and, when every database answered, records the unrecorded shards.
   * Waits at most `INSTALL_TIMEOUT_MS` once they have answered. Returns the tables: `tables`, then
   * `@shardkit/prisma`'s that the databases have.
   */
  async open(
    identities: ReadonlyMap<Database<Client>, string>,
    tables: readonly FencedTable[],
    timeoutMs: number,
  ): Promise<readonly FencedTable[]> {
    const reachable = this.registry.databases.filter((p) => identities.has(p));
    if (reachable.length === 0)
      throw new DatabasesUnansweredError(
        `the partition map cannot be opened: no database answered within ${timeoutMs} ms`,
        this.registry.databases.map((p) => ({
          database: p.name,
          error: `no answer in ${timeoutMs} ms`,
        })),
      );
    return bounded(installing(), async () => {
      const schema = (await Promise.all(reachable.map((p) => ownershipSchemaIssues(raw(p), p.name)))).flat();
      if (schema.length > 0) throw new OwnershipOptionsError(schema);
      const found = await resolveTables(reachable, tables, { timeoutMs });
      if (found.issues.length > 0) throw new OwnershipOptionsError(found.issues);
      await Promise.all(reachable.map((p) => this.functionsIn(p)));
      if (reachable.length < this.registry.databases.length) return found.tables;
      await this.recordUnrecorded();
      return found.tables;
    });
  }

  /** Whether shardkit's functions are installed in `physical` as this version has them. */
  has(physical: Database<Client>): boolean {
    return this.installed.has(physical);
  }

  /** Installs shardkit's functions in `physical` (once per map). */
  async functionsIn(physical: Database<Client>): Promise<void> {
    if (this.installed.has(physical)) return;
    await installFunctions(raw(physical));
    this.installed.add(physical);
  }

  /** Records the placement of the shards no database has a record of (see `recordUnrecorded`). */
  async recordUnrecorded(): Promise<void> {
    await recordUnrecorded(this.registry.databases, (p) => this.map.identityOf(p));
    this.recorded = true;
  }
}
