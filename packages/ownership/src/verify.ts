import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { type PrimaryKey, primaryKeys } from "./changes.js";
import { OwnershipOptionsError } from "./errors.js";
import { type Raw, raw } from "./raw.js";
import { type FencedTable, shardOfRowSql } from "./sql.js";

/** The seed of the rows' checksums (`hashtextextended`): any constant; both sides of a check use it. */
const CHECKSUM_SEED = 7301;

// How a move checks its copy: per table, the shard's row count and an order-free checksum (the sum
// of a 64-bit hash of each row's JSON: no sort, one pass), source against target.
//
// A live move checks in two parts, so that the work done while writes wait does not grow with the
// shard. While the shard is armed, every write of its rows at the source notes the row's primary key
// in `ShardMoveChange` (in the writer's transaction). Before the fence: a REPEATABLE READ snapshot
// of the source, then one of the target, then the keys noted so far (read after both): every row
// whose key is not among them has not been written since the shard was armed, so it is the same in
// the source's snapshot, in the copy and in the target's snapshot (the target changes only by
// replaying source transactions that committed before its snapshot, each of which noted its keys):
// those rows are compared. Inside the fence (no write can happen any more, and the target has
// replayed everything): the rows of every noted key, looked up by primary key, are compared. Every
// row is compared at its final values, by one of the two parts.

/** One table's part of a digest: the shard's rows in it (of some keys), and their checksum. */
export interface Digest {
  rows: number;
  /** The sum of the rows' hashes (null: no rows, or sums not asked for). */
  sum: string | null;
}

/** Which of the shard's rows a digest covers: all of them, all but the noted keys, or only those. */
type Part = { kind: "all" } | { kind: "except" | "only"; keys: ReadonlyMap<string, readonly string[]> };

/** The keys noted per table since the shard was armed (each a JSON array of its primary key's values). */
export async function changedKeys<Client extends ShardClient>(
  from: Database<Client>,
  shard: ShardIdentifier,
): Promise<Map<string, string[]>> {
  const rows = await raw(from).$queryRawUnsafe<{ table: string; key: string }[]>(
    `SELECT "table", key FROM "ShardMoveChange" WHERE shard = $1`,
    shard.bits,
  );
  const keys = new Map<string, string[]>();
  for (const { table, key } of rows) {
    const list = keys.get(table);
    if (list) list.push(key);
    else keys.set(table, [key]);
  }
  return keys;
}

/**
 * The digest of each of `tables` (in their order) for `shard` on `db`, in one query: every row, or
 * all but / only the rows whose primary keys are `part.keys` (matched by value, so the lookup of a
 * few keys uses the primary key's index). `sums: false` counts rows only.
 */
export async function digest(
  db: Raw,
  tables: readonly FencedTable[],
  keyOf: ReadonlyMap<string, PrimaryKey>,
  shard: ShardIdentifier,
  part: Part,
  sums = true,
): Promise<Digest[]> {
  const values: unknown[] = [shard.bits];
  const parts: string[] = [];
  tables.forEach((table, i) => {
    let filter = "";
    if (part.kind !== "all") {
      const keys = part.keys.get(table.table) ?? [];
      if (part.kind === "only" && keys.length === 0) return; // nothing of it to compare
      const key = keyOf.get(table.table);
      if (!key)
        throw new OwnershipOptionsError([
          `${table.table} has no primary key: the rows written during the move cannot be looked up`,
        ]);
      values.push(`[${keys.join(",")}]`);
      const tuple = `(${key.columns.map((c) => `t."${c.replaceAll('"', '""')}"`).join(", ")})`;
      const typed = key.columns.map((_, n) => `(k->>${n})::${key.types[n]}`).join(", ");
      filter = ` AND ${tuple} ${part.kind === "except" ? "NOT IN" : "IN"} (SELECT ${typed} FROM jsonb_array_elements($${values.length}::jsonb) k)`;
    }
    parts.push(
      `SELECT ${i} AS i, count(*)::int AS rows, ${sums ? `sum(hashtextextended(row_to_json(t)::text, ${CHECKSUM_SEED}))::text` : "NULL::text"} AS sum
       FROM "${table.table}" t WHERE ${shardOfRowSql(table, "t")} = $1${filter}`,
    );
  });
  const found =
    parts.length === 0
      ? []
      : await db.$queryRawUnsafe<{ i: number; rows: number; sum: string | null }[]>(
          parts.join(" UNION ALL "),
          ...values,
        );
  return tables.map((_, i) => {
    const row = found.find((r) => r.i === i);
    return { rows: row?.rows ?? 0, sum: row?.sum ?? null };
  });
}

/** The differences between the source's and the target's digests, one line per table that differs. */
export function mismatches(
  tables: readonly FencedTable[],
  source: readonly Digest[],
  target: readonly Digest[],
  what = "",
): string[] {
  const found: string[] = [];
  tables.forEach((table, i) => {
    const [a, b] = [source[i]!, target[i]!];
    if (a.rows !== b.rows || a.sum !== b.sum)
      found.push(
        `${table.table}${what}: source ${a.rows} rows (${a.sum ?? "-"}), target ${b.rows} rows (${b.sum ?? "-"})`,
      );
  });
  return found;
}

/**
 * The settings a row's JSON depends on, made the same on both sides of a check: a timestamp's
 * offset follows the session's TimeZone, an interval's text its IntervalStyle, a float's digits
 * extra_float_digits. Two databases set up differently must not look different.
 */
const SAME_TEXT = [
  "SET LOCAL TimeZone = 'UTC'",
  "SET LOCAL IntervalStyle = 'postgres'",
  "SET LOCAL extra_float_digits = 1",
];

/** `fn` in a transaction on `db` whose rows' JSON does not depend on the session's settings. */
async function plainly<R>(db: Raw, fn: (tx: Raw) => Promise<R>, options?: object): Promise<R> {
  return db.$transaction(async (tx) => {
    for (const statement of SAME_TEXT) await tx.$executeRawUnsafe(statement);
    return fn(tx);
  }, options);
}

/** What a check found: per table, the rows compared, and the differences. */
export interface Check {
  rows: number[];
  mismatches: string[];
}

/** What a check compares: the rows of `shard` in `tables`, at the source `from` and in its copy at `to`. */
export interface CopyToCheck<Client extends ShardClient> {
  tables: readonly FencedTable[];
  from: Database<Client>;
  to: Database<Client>;
  shard: ShardIdentifier;
  /** Compare checksums too, not only row counts. */
  sums: boolean;
}

/**
 * The whole shard, source against target (an offline move, inside its fence: nothing changes
 * either side while it runs).
 */
export async function checkAll<Client extends ShardClient>({
  tables,
  from,
  to,
  shard,
  sums,
}: CopyToCheck<Client>): Promise<Check> {
  const none = new Map<string, PrimaryKey>();
  const [a, b] = await Promise.all([
    plainly(raw(from), (tx) => digest(tx, tables, none, shard, { kind: "all" }, sums), { timeout: 600_000 }),
    plainly(raw(to), (tx) => digest(tx, tables, none, shard, { kind: "all" }, sums), { timeout: 600_000 }),
  ]);
  return { rows: b.map((d) => d.rows), mismatches: mismatches(tables, a, b) };
}

/**
 * A live move's check before its fence: every row not written since the shard was armed, in a
 * snapshot of each side (see the top of this file for why that is exact while writes go on).
 */
export async function checkUnchanged<Client extends ShardClient>(
  { tables, from, to, shard, sums }: CopyToCheck<Client>,
  timeoutMs: number,
): Promise<Check> {
  const keyOf = await primaryKeys(raw(from), tables);
  const options = { isolationLevel: "RepeatableRead", timeout: timeoutMs, maxWait: 30_000 };
  // One core at a time for a pass over the whole shard: no parallel workers, and the two sides one
  // after the other (their snapshots are taken first, so the order changes nothing). It runs before
  // the fence, while the shard and its neighbours take writes: it must not starve them.
  const gentle = "SET LOCAL max_parallel_workers_per_gather = 0";
  return plainly(
    raw(from),
    async (source) => {
      await source.$executeRawUnsafe(gentle);
      await source.$queryRawUnsafe("SELECT 1"); // the source's snapshot is taken here (SET takes none)
      return plainly(
        raw(to),
        async (target) => {
          await target.$executeRawUnsafe(gentle);
          await target.$queryRawUnsafe("SELECT 1"); // then the target's
          const keys = await changedKeys(from, shard); // then the keys noted so far, read after both
          const part = { kind: "except" as const, keys };
          const a = await digest(source, tables, keyOf, shard, part, sums);
          const b = await digest(target, tables, keyOf, shard, part, sums);
          return {
            rows: b.map((d) => d.rows),
            mismatches: mismatches(tables, a, b, " (rows not written during the move)"),
          };
        },
        options,
      );
    },
    options,
  );
}

/**
 * A live move's check inside its fence, once the target has replayed the source's last write: the
 * rows of every key noted since the shard was armed (all of them: written before or after the first
 * check), looked up by primary key on both sides. Its work grows with the rows written during the
 * move, not with the shard.
 */
export async function checkChanged<Client extends ShardClient>(
  { tables, from, to, shard, sums }: CopyToCheck<Client>,
  /** How long each side's transaction may take (and wait for a connection): the freeze's budget. */
  timeoutMs: number,
): Promise<Check & { keys: number }> {
  const [keyOf, keys] = await Promise.all([primaryKeys(raw(from), tables), changedKeys(from, shard)]);
  const part = { kind: "only" as const, keys };
  const options = { timeout: timeoutMs, maxWait: timeoutMs };
  const [a, b] = await Promise.all([
    plainly(raw(from), (tx) => digest(tx, tables, keyOf, shard, part, sums), options),
    plainly(raw(to), (tx) => digest(tx, tables, keyOf, shard, part, sums), options),
  ]);
  return {
    rows: b.map((d) => d.rows),
    mismatches: mismatches(tables, a, b, " (rows written during the move)"),
    keys: [...keys.values()].reduce((n, k) => n + k.length, 0),
  };
}
