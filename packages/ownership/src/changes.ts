import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { LOCKS, retry } from "@shardkit/prisma/internal";
import { EpochConflictError } from "./errors.js";
import { type Raw, raw } from "./raw.js";
import {
  FENCE_ARGUMENTS_SQL,
  FENCE_TRIGGERS,
  type FencedTable,
  fenceArguments,
  fenceStatements,
  PRIMARY_KEYS_SQL,
} from "./sql.js";

/**
 * How records of ownership change in one database, and how its fence follows them: every change runs
 * in one transaction under the database's change lock, and the fence's list of shards (the triggers'
 * `WHEN`) is kept in line with the records, table by table. Used by the partition map (a router's
 * heal of a lapsed fence, its completion of a decided switch) and by a move's lease (every step).
 */
export class OwnershipChanges<Client extends ShardClient = ShardClient> {
  constructor(
    /** The tables holding shard rows (read when needed: the map resolves them at open). */
    private readonly tables: () => readonly FencedTable[],
    /** How long a change waits for any lock before it gives way and runs again. */
    readonly lockTimeoutMs: number,
    /** Told after each change has committed (the map announces it to the routers), without being waited for. */
    private readonly changed: () => unknown = () => {},
  ) {}

  /**
   * A change of `database`'s records: `fn`, in one transaction under the database's change lock.
   *
   * The fence's list of shards is kept apart from the records, table by table, each table in a
   * transaction of its own (`relist`), so trigger DDL never holds one table while it waits for
   * another: no deadlock with a writer that holds that other table, and each table's writers wait
   * only for their own table. Listing a shard is always safe (its writes then check its record);
   * unlisting is safe only once its record says owned. So:
   * - `list`: a shard `fn` will make not owned (a fence, an incoming record). It is listed on every
   *   table first, and `fn` runs only if, under the change lock, every table still lists it
   *   (else listing runs again).
   * - after `fn` commits, the list is brought in line with the records (shards no longer needing a
   *   check are unlisted), unless `relist: false` (a switch: the list is tidied later, outside the
   *   freeze).
   */
  async change<R>(
    database: Database<Client>,
    fn: (tx: Raw) => Promise<R>,
    options: { list?: number; relist?: boolean } = {},
  ): Promise<R> {
    const { list } = options;
    let result: R;
    try {
      for (let attempt = 1; ; attempt++) {
        if (list !== undefined) await this.relist(database, [list]);
        const done = await this.locked(database, async (tx) => {
          if (list !== undefined && !(await this.listedEverywhere(tx, list)))
            return { listed: false as const };
          return { listed: true as const, value: await fn(tx) };
        });
        if (done.listed) {
          result = done.value;
          break;
        }
        if (attempt >= 20)
          throw new EpochConflictError(
            ShardIdentifier.fromBits(list!),
            `its listing in ${database.name}'s fence kept being undone by concurrent changes`,
          );
      }
    } catch (error) {
      if (list !== undefined) await this.relist(database).catch(() => {});
      throw error;
    }
    if (options.relist !== false) await this.relist(database);
    return result;
  }

  /**
   * `fn` in a transaction on `database` holding its change lock, waiting at most `lockTimeoutMs`
   * for any lock (the change lock itself too): a transaction that waits longer gives way (rolls
   * back, so the writers or changes in its path finish first) and runs again. Two changes that
   * each hold one database's lock and wait for the other's (a move from a to e and one from e to a,
   * nested) thus never wait on each other forever.
   */
  async locked<R>(database: Database<Client>, fn: (tx: Raw) => Promise<R>): Promise<R> {
    // A lock given way (lock_timeout): its holder is at work. Waits grow to about 100 ms (50 to 150
    // with jitter), 100 tries in all: about 10 s before the change gives up.
    const result = await retry(
      () =>
        raw(database).$transaction(
          async (tx) => {
            await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${this.lockTimeoutMs}ms'`);
            // A changer frozen mid-change (a stalled host) never holds these locks for long.
            await tx.$executeRawUnsafe("SET LOCAL idle_in_transaction_session_timeout = '60s'");
            await tx.$queryRawUnsafe(
              `SELECT pg_advisory_xact_lock(${LOCKS.ownershipChanges})::text AS locked`,
            );
            return fn(tx);
          },
          { timeout: 60_000, maxWait: 30_000 },
        ),
      { retries: 99, retryable: gaveWay, maxMs: 100 },
    );
    void Promise.resolve(this.changed()).catch(() => {});
    return result;
  }

  /**
   * Brings each table's fence list in line with `database`'s records (the shards it does not simply
   * own: armed, fenced, moved away, incoming), plus `also`. One transaction per table; no DDL for a
   * table whose list is right already, so a change of state of a listed shard (fence, switch,
   * tombstone) is one row update while writes wait.
   */
  async relist(database: Database<Client>, also: readonly number[] = []): Promise<void> {
    const wantedIn = async (db: Raw) => {
      const records = await db.$queryRawUnsafe<{ shard: number }[]>(
        `SELECT shard FROM "ShardOwnership" WHERE state <> 'owned' OR peer IS NOT NULL`,
      );
      return [...new Set([...records.map((r) => r.shard), ...also])].sort((a, b) => a - b);
    };
    const inLine = (
      table: FencedTable,
      wanted: number[],
      key: readonly string[],
      present: { args: string[] } | undefined,
    ) =>
      wanted.length === 0
        ? present === undefined
        : present?.args.length === FENCE_TRIGGERS.length &&
          present.args.every((a) => a === fenceArguments(table, wanted, key));
    // The usual case, read without locks: every table is in line already (a listed shard changing
    // state). A change that races this one lists for itself.
    const db = raw(database);
    const [wanted, listings, keys] = await Promise.all([
      wantedIn(db),
      this.listings(db),
      primaryKeys(db, this.tables()),
    ]);
    for (const table of this.tables()) {
      const key = keys.get(table.table)?.columns ?? [];
      if (inLine(table, wanted, key, listings.get(table.table))) continue;
      await this.ddl(database, table.table, async (tx) => {
        const now = await wantedIn(tx);
        if (inLine(table, now, key, (await this.listings(tx)).get(table.table))) return;
        for (const statement of fenceStatements(table, now, key)) await tx.$executeRawUnsafe(statement);
      });
    }
  }

  /**
   * DDL on `table` (trigger changes, a replica identity), under the change lock. Its lock conflicts
   * with every writer of the table: while it waits for one, the writers that come after queue behind
   * it. So it never waits behind a long transaction: first it waits, without queueing, until no
   * transaction older than `lockTimeoutMs` holds a lock on the table that conflicts with it (a long
   * writer, a vacuum), for at most `patienceMs` (then it goes ahead, as before); then it waits at
   * most `lockTimeoutMs` for its lock, giving way and trying again if that is not enough.
   */
  async ddl<R>(
    database: Database<Client>,
    table: string,
    fn: (tx: Raw) => Promise<R>,
    patienceMs = 60_000,
  ): Promise<R> {
    const until = performance.now() + patienceMs;
    for (let round = 0; performance.now() < until; round++) {
      const [held] = await raw(database).$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.relation = to_regclass(quote_ident($1)) AND l.granted AND l.pid <> pg_backend_pid()
           AND l.mode <> 'AccessShareLock' AND l.mode <> 'RowShareLock'
           AND a.xact_start < clock_timestamp() - $2::float8 * interval '1 millisecond'`,
        table,
        this.lockTimeoutMs,
      );
      if (held!.n === 0) break;
      await new Promise((r) => setTimeout(r, Math.min(200, 10 * 2 ** Math.min(round, 5))));
    }
    return this.locked(database, fn);
  }

  /** Whether every table's three fence triggers list `bits`. */
  private async listedEverywhere(tx: Raw, bits: number): Promise<boolean> {
    const listings = await this.listings(tx);
    return this.tables().every((table) => {
      const present = listings.get(table.table);
      return (
        present?.args.length === FENCE_TRIGGERS.length && present.shards.every((list) => list.includes(bits))
      );
    });
  }

  /** Each table's fence triggers: their arguments, and the shards each lists. */
  private async listings(tx: Raw) {
    const rows = await tx.$queryRawUnsafe<{ table: string; name: string; args: string }[]>(
      FENCE_ARGUMENTS_SQL,
      FENCE_TRIGGERS,
    );
    const byTable = new Map<string, { args: string[]; shards: number[][] }>();
    for (const row of rows) {
      const entry = byTable.get(row.table) ?? { args: [], shards: [] };
      entry.args.push(row.args);
      entry.shards.push((row.args.split("|")[2] ?? "").split(",").filter(Boolean).map(Number));
      byTable.set(row.table, entry);
    }
    return byTable;
  }
}

/** A table's primary key: its columns in order, and their types as PostgreSQL writes them. */
export interface PrimaryKey {
  columns: string[];
  types: string[];
}

/** The primary key of each of `tables` in `db` (a table without one is absent). */
export async function primaryKeys(db: Raw, tables: readonly FencedTable[]): Promise<Map<string, PrimaryKey>> {
  const rows = await db.$queryRawUnsafe<{ table: string; columns: string[]; types: string[] }[]>(
    PRIMARY_KEYS_SQL,
    tables.map((t) => t.table),
  );
  return new Map(rows.map((r) => [r.table, { columns: r.columns, types: r.types }]));
}

/** A change that gave way: it waited too long for a lock (55P03) or lost a deadlock (40P01). */
export function gaveWay(error: unknown): boolean {
  const text = `${(error as { code?: unknown })?.code ?? ""} ${(error as Error)?.message ?? ""} ${JSON.stringify((error as { meta?: unknown })?.meta ?? {})}`;
  return /55P03|40P01|lock timeout|deadlock detected/.test(text);
}
