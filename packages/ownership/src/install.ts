// Installing a partition map in its databases: shardkit's functions (each replaced only when this
// version has it otherwise) and the first record of every shard no database has recorded. Each is
// done once per database, by whichever router comes first: the others learn from one statement per
// database that it is done (`SETUP_SQL`), or, having waited for the database's install lock, look
// again and find it done. `MapInstall` is what one map installed, at open and as databases that
// were down answer.
import { createHash } from "node:crypto";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { IDENTITY_COLUMNS, identityOf, LOCKS } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { DatabasesUnansweredError, OwnershipOptionsError } from "./errors.js";
import type { OwnershipRow } from "./owners.js";
import { bounded, lastLine, mapRaw, type Raw } from "./raw.js";
import type { Signals } from "./signals.js";
import {
  type FencedTable,
  FUNCTION_BODIES_SQL,
  FUNCTIONS,
  functionBody,
  MAP_RECORDS_SQL,
  OWNERSHIP_COLUMNS,
  ownershipSchemaIssues,
  schemaIssuesOf,
} from "./sql.js";
import { SHARDKIT_TABLES, tablesFrom } from "./tables.js";

/**
 * How long a map waits at least for its databases, once they have answered, to install its functions
 * and record the configured owners: a lock never given, or a server that froze since, fails it. A map
 * whose `timeoutMs` is longer waits that long (`installMs`), and as long for a connection to begin
 * each install transaction: a fleet whose routers all open at once on a busy host is slow, not down.
 */
export const INSTALL_TIMEOUT_MS = 30_000;

/** The install's deadline for a map whose databases answer within `timeoutMs`. */
const installMs = (timeoutMs: number) => Math.max(INSTALL_TIMEOUT_MS, timeoutMs);

/** An install transaction's limits: a connection within `timeoutMs` (10 s at least), all of it within the install's deadline. */
const installTx = (timeoutMs: number) => ({
  timeout: installMs(timeoutMs),
  maxWait: Math.max(10_000, timeoutMs),
});

/** How many databases an open asks at once what they hold (as `databaseIdentities` asks who they are). */
const SETUP_CONCURRENCY = 16;

/** The deadline of the install and recording (`installMs(timeoutMs)` from now). */
function installing(timeoutMs: number) {
  const ms = installMs(timeoutMs);
  return {
    at: performance.now() + ms,
    late: (database: string) =>
      new DatabasesUnansweredError("the partition map could not be installed", [
        { database, error: `no answer in ${ms} ms` },
      ]),
  };
}

/**
 * Serialises installing shardkit's functions and recording unrecorded shards within one database:
 * service instances opening their maps at the same moment would otherwise replace the same
 * function at once, which PostgreSQL refuses ("tuple concurrently updated").
 */
const INSTALL = `SELECT pg_advisory_xact_lock(${LOCKS.install})::text AS locked`;
/** The install lock if no one holds it (then held until the transaction ends). */
const TRY_INSTALL = `SELECT pg_try_advisory_xact_lock(${LOCKS.install}) AS locked`;

/**
 * What a map's open needs to know of a database, in one statement: what it says it is, the columns
 * it has of @shardkit/ownership's tables, which of shardkit's tables it has, a digest of each of
 * shardkit's functions it holds, and its records as a router reads them (`MAP_RECORDS_SQL`: the
 * open's first read of the map, when nothing was left to record). A database without a `ShardOwnership`
 * table fails it (then `ownershipSchemaIssues` says what it lacks).
 */
const SETUP_SQL = `SELECT ${IDENTITY_COLUMNS},
  (SELECT coalesce(json_agg(json_build_object('table', c.relname::text, 'column', a.attname::text)), '[]'::json)
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relname::text = ANY($1::text[])
       AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
  (SELECT coalesce(array_agg(name), '{}') FROM unnest($2::text[]) AS name
     WHERE to_regclass(quote_ident(name)) IS NOT NULL) AS tables,
  (SELECT coalesce(json_agg(json_build_object('name', proname::text, 'digest', md5(prosrc))), '[]'::json)
     FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname::text = ANY($3::text[])) AS functions,
  (SELECT json_agg(r) FROM (${MAP_RECORDS_SQL}) r) AS records`;

/** What `SETUP_SQL` tells of a database. */
interface SetUp {
  identity: string;
  columns: { table: string; column: string }[];
  tables: Set<string>;
  /** Whether some function of shardkit's is missing there, or differs from this version's. */
  stale: boolean;
  recorded: number[];
  /** Its records as `MAP_RECORDS_SQL` reads them, and their digest. */
  read: MapRead;
}

/** A database's records as a router reads them (`MAP_RECORDS_SQL`), and their digest. */
export interface MapRead {
  rows: (OwnershipRow & { lapsed?: boolean | null })[];
  digest: string;
}

/** The digest of each of shardkit's functions as this version has it (`md5` of its body, as `SETUP_SQL` reads it). */
const DIGESTS = new Map(
  FUNCTIONS.map((f) => [f.name, createHash("md5").update(functionBody(f.create)).digest("hex")]),
);

/** What `physical` holds of the map's set-up (`SETUP_SQL`), or what it lacks of its schema. */
async function setUpOf<Client extends ShardClient>(
  physical: Database<Client>,
): Promise<SetUp | { issues: string[] }> {
  const db = mapRaw(physical);
  let row: {
    server: string | null;
    database: string;
    columns: { table: string; column: string }[];
    tables: string[];
    functions: { name: string; digest: string }[];
    records: (OwnershipRow & { lapsed?: boolean | null; digest: string })[];
  };
  try {
    const rows = await db.$queryRawUnsafe<(typeof row)[]>(
      SETUP_SQL,
      Object.keys(OWNERSHIP_COLUMNS),
      SHARDKIT_TABLES.map((t) => t.table),
      FUNCTIONS.map((f) => f.name),
    );
    row = rows[0]!;
  } catch (error) {
    // No ShardOwnership table: say what the database lacks (a database that does not answer fails
    // this too, with the first error).
    const issues = await ownershipSchemaIssues(db, physical.name).catch(() => {
      throw error;
    });
    if (issues.length > 0) return { issues };
    throw error;
  }
  const held = new Map(row.functions.map((f) => [f.name, f.digest]));
  const rows = row.records.filter((r) => r.shard !== null).map(({ digest: _, ...r }) => r);
  return {
    identity: identityOf(row),
    columns: row.columns,
    tables: new Set(row.tables),
    stale: [...DIGESTS].some(([name, digest]) => held.get(name) !== digest),
    recorded: rows.map((r) => r.shard),
    read: { rows, digest: row.records[0]!.digest },
  };
}

/**
 * Records the configured owner of every shard no database has a record of, as owned at epoch
 * 1, and returns the databases it recorded shards in. Several openers at once record it once: the
 * recorder holds every database's install lock (taken in the order of their identities, the same in
 * every process, so two openers never wait on each other in a circle) from its read of the records
 * to its commit. An opener that finds the first database's lock held waits for it to be given, then
 * reads the records again (without any lock): they are recorded, or it tries again. Nothing
 * unrecorded (the usual start), by `known` (each database's recorded shards, read just before) or
 * a read: no lock.
 */
export async function recordUnrecorded<Client extends ShardClient>(
  physical: readonly Database<Client>[],
  identityOf: (database: Database<Client>) => string,
  timeoutMs: number,
  known?: ReadonlyMap<Database<Client>, readonly number[]>,
): Promise<string[]> {
  const databases = [...physical].sort((a, b) => (identityOf(a) < identityOf(b) ? -1 : 1));
  const unrecorded = (recorded: ReadonlySet<number>) =>
    databases.flatMap((p) => p.shards.filter((s) => !recorded.has(s.bits)).map((shard) => ({ shard, p })));
  const read = async (dbs: readonly Raw[]) =>
    new Set(
      (
        await Promise.all(
          dbs.map((db) => db.$queryRawUnsafe<{ shard: number }[]>(`SELECT shard FROM "ShardOwnership"`)),
        )
      )
        .flat()
        .map((r) => r.shard),
    );
  const plain = databases.map((p) => mapRaw(p));
  const first =
    known && databases.every((p) => known.has(p))
      ? new Set(databases.flatMap((p) => known.get(p)!))
      : await read(plain);
  if (unrecorded(first).length === 0) return [];
  // Holding the locks of databases[0..i), takes the next one's; under every lock, reads the records
  // again and records what is still unrecorded, one statement per database.
  const holding = async (i: number, held: Raw[]): Promise<string[]> => {
    if (i === databases.length) {
      const missing = unrecorded(await read(held));
      const at = databases.filter((p) => missing.some((m) => m.p === p));
      await Promise.all(
        at.map((p) =>
          held[databases.indexOf(p)]!.$executeRawUnsafe(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) SELECT s, 1, 'owned' FROM unnest($1::int[]) AS s ON CONFLICT (shard) DO NOTHING`,
            missing.filter((m) => m.p === p).map((m) => m.shard.bits),
          ),
        ),
      );
      return at.map((p) => p.name);
    }
    return mapRaw(databases[i]!).$transaction(async (tx) => {
      await tx.$queryRawUnsafe(INSTALL);
      return holding(i + 1, [...held, tx]);
    }, installTx(timeoutMs));
  };
  for (;;) {
    const recorded = await mapRaw(databases[0]!).$transaction(async (tx) => {
      const [lock] = await tx.$queryRawUnsafe<{ locked: boolean }[]>(TRY_INSTALL);
      return lock?.locked ? holding(1, [tx]) : undefined;
    }, installTx(timeoutMs));
    if (recorded !== undefined) return recorded;
    // Another opener records (or installs there): once it is done, the records say whether it is left to do.
    await plain[0]!.$queryRawUnsafe(INSTALL);
    if (unrecorded(await read(plain)).length === 0) return [];
  }
}

/**
 * Installs shardkit's functions in one database, each only when the database does not hold it as
 * this version has it, and says whether it installed any. Replacing a function is an update of its
 * catalog row, which two sessions cannot do at once (PostgreSQL raises "tuple concurrently
 * updated"): installers queue on the database's install lock, and each checks again once it holds
 * it, so the ones after the first find the functions in place and change nothing. `checked`: the
 * caller has just found some function stale (no look before the lock).
 */
export async function installFunctions(db: Raw, timeoutMs: number, checked = false): Promise<boolean> {
  const stale = async (reader: Raw) => {
    const rows = await reader.$queryRawUnsafe<{ name: string; body: string }[]>(
      FUNCTION_BODIES_SQL,
      FUNCTIONS.map((f) => f.name),
    );
    return FUNCTIONS.filter((f) => !rows.some((r) => r.name === f.name && r.body === functionBody(f.create)));
  };
  if (!checked && (await stale(db)).length === 0) return false;
  return db.$transaction(async (tx) => {
    await tx.$queryRawUnsafe(INSTALL);
    const left = await stale(tx);
    for (const f of left) {
      for (const statement of f.before ?? []) await tx.$executeRawUnsafe(statement);
      await tx.$executeRawUnsafe(f.create);
    }
    return left.length > 0;
  }, installTx(timeoutMs));
}

/** What one partition map installed in its databases, and installs as the ones that were down answer. */
export class MapInstall<Client extends ShardClient> {
  /** Databases whose functions are installed as this version has them. */
  private readonly installed = new Set<Database<Client>>();
  /** Whether every shard has been recorded (every database answered at once, at open or later). */
  recorded = false;
  /**
   * The records the open's set-up read, by database, when they make the map's first read: every
   * database answered and recorded every shard already (the ordinary start; after a recording,
   * they are read again). Taken once (`seeds`).
   */
  private seeded: Map<Database<Client>, MapRead> | undefined;

  constructor(
    private readonly registry: ShardRegistry<Client>,
    /** The map: what each database says it is, and how a change of records is announced. */
    private readonly map: {
      identityOf(database: Database<Client>): string;
      announce(): Promise<void>;
      /** How long its databases are waited for (`PartitionMapOptions.timeoutMs`). */
      readonly timeoutMs: number;
    },
    private readonly signals: Signals,
  ) {}

  /**
   * The open's install. Asks every database, `SETUP_CONCURRENCY` at a time and each within the
   * map's `timeoutMs`, what it holds (one statement: `SETUP_SQL`), and notes in `identities` what each
   * that answered says it is. Then checks that they have @shardkit/ownership's schema, finds which
   * of `@shardkit/prisma`'s tables they have, installs shardkit's functions where some are missing
   * or differ, and, when every database answered, records the unrecorded shards. Waits at most
   * `INSTALL_TIMEOUT_MS` (or `timeoutMs` when longer) for the install once they have answered.
   * Returns the tables: `tables`, then `@shardkit/prisma`'s that the databases have.
   */
  async open(
    identities: Map<Database<Client>, string>,
    tables: readonly FencedTable[],
  ): Promise<readonly FencedTable[]> {
    const { timeoutMs } = this.map;
    const asked = await scatter(this.registry.databases, (p) => setUpOf(p), {
      policy: "partial",
      concurrency: SETUP_CONCURRENCY,
      targetTimeoutMs: timeoutMs,
      key: (p) => p.name,
      abortable: false,
    });
    if (asked.values.length === 0)
      throw new DatabasesUnansweredError(
        `the partition map cannot be opened: no database answered within ${timeoutMs} ms`,
        asked.missing.map((m) => ({
          database: m.target.name,
          error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
        })),
      );
    const answered = new Map<Database<Client>, SetUp>();
    const issues: string[] = [];
    for (const outcome of asked.outcomes) {
      if (outcome.status !== "fulfilled") continue;
      const found = outcome.value;
      if ("issues" in found) issues.push(...found.issues);
      else {
        answered.set(outcome.target, found);
        identities.set(outcome.target, found.identity);
        issues.push(...schemaIssuesOf(found.columns, outcome.target.name));
      }
    }
    if (issues.length > 0) throw new OwnershipOptionsError(issues);
    const found = tablesFrom(new Map([...answered].map(([p, s]) => [p, s.tables])), tables);
    if (found.issues.length > 0) throw new OwnershipOptionsError(found.issues);
    const everyone = answered.size === this.registry.databases.length;
    const recorded = new Set([...answered.values()].flatMap((s) => s.recorded));
    if (everyone && this.registry.shards.every((shard) => recorded.has(shard.bits)))
      this.seeded = new Map([...answered].map(([p, s]) => [p, s.read]));
    return bounded(this.deadline(), async () => {
      await Promise.all([...answered].map(([p, s]) => this.functionsIn(p, s.stale)));
      if (everyone) await this.recordUnrecorded(new Map([...answered].map(([p, s]) => [p, s.recorded])));
      return found.tables;
    });
  }

  /** The deadline of an install or recording from now (`installing`). */
  deadline() {
    return installing(this.map.timeoutMs);
  }

  /** The records the open's set-up read, when they make the map's first read (once; see `seeded`). */
  seeds(): Map<Database<Client>, MapRead> | undefined {
    const seeds = this.seeded;
    this.seeded = undefined;
    return seeds;
  }

  /** Whether shardkit's functions are installed in `physical` as this version has them. */
  has(physical: Database<Client>): boolean {
    return this.installed.has(physical);
  }

  /**
   * Installs shardkit's functions in `physical` (once per map). `stale`: whether a look just taken
   * found some missing or different (false: nothing to do; undefined: not looked yet).
   */
  async functionsIn(physical: Database<Client>, stale?: boolean): Promise<void> {
    if (this.installed.has(physical)) return;
    if (stale !== false && (await installFunctions(mapRaw(physical), this.map.timeoutMs, stale === true)))
      this.signals.emit({ type: "install", database: physical.name, what: "functions" });
    this.installed.add(physical);
  }

  /** Records the configured owners of the shards no database has a record of (see `recordUnrecorded`). */
  async recordUnrecorded(known?: ReadonlyMap<Database<Client>, readonly number[]>): Promise<void> {
    const at = await recordUnrecorded(
      this.registry.databases,
      (p) => this.map.identityOf(p),
      this.map.timeoutMs,
      known,
    );
    for (const database of at) this.signals.emit({ type: "install", database, what: "records" });
    this.recorded = true;
    // A first recording is a change of records like any other: announced (before the open or the
    // read that made it goes on), so that routers opened before it learn of it from their next tick.
    if (at.length > 0) await this.map.announce();
  }
}
