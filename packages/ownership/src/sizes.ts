// How big each logical shard is: its rows in each table that holds shard rows, and their share of
// the table's bytes. What a move copies, and the second figure a balancer weighs.
import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { OwnershipOptionsError } from "./errors.js";
import { lastLine, raw } from "./raw.js";
import { type FencedTable, literal, shardOfRowSql, tableIssues } from "./sql.js";

/** One logical shard's size on one database. */
export interface ShardSize {
  shard: ShardIdentifier;
  /** The database holding these rows (its registry name). */
  database: string;
  /** Its rows, in every table given that the database has. */
  rows: number;
  /** Its rows' share of their tables' bytes on disk (indexes and TOAST included), by row count. */
  bytes: number;
}

export interface ShardSizes {
  /** Per database and shard, in the registry's order of databases then shard order. */
  sizes: ShardSize[];
  /** Databases that did not answer in time or failed, by name, with why: their shards' sizes are unknown. */
  unanswered: { database: string; error: string }[];
}

export interface MeasureShardSizesOptions {
  /** Every table holding shard rows (as for `moveShard`). Tables a database lacks are skipped there. */
  tables: readonly FencedTable[];
  /** How long each database may take (its counts are full scans of the tables). Default 60 s. */
  timeoutMs?: number;
}

/**
 * Counts each logical shard's rows in `tables` on every database of `registry` (a database in
 * parallel with the others; one `GROUP BY` per table), and gives each shard the share of its
 * table's bytes (`pg_total_relation_size`) its rows make. Rows of a shard on a database that no
 * longer owns it (a copy kept after a move) are counted where they are: the caller reads the
 * owner's. It only reads. The counts scan each table: run it where a full scan is acceptable.
 */
export async function measureShardSizes<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: MeasureShardSizesOptions,
): Promise<ShardSizes> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const issues = tableIssues(options.tables);
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 1))
    issues.push(`timeoutMs: expected a number >= 1, got ${timeoutMs}`);
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  const result = await scatter(
    registry.databases,
    async (physical: Database<Client>) => {
      const db = raw(physical);
      const present = await db.$queryRawUnsafe<{ name: string }[]>(
        `SELECT t AS name FROM unnest(ARRAY[${options.tables.map((t) => literal(t.table)).join(", ")}]::text[]) t
          WHERE to_regclass(quote_ident(t)) IS NOT NULL`,
      );
      const have = new Set(present.map((p) => p.name));
      const byShard = new Map<number, { rows: number; bytes: number }>();
      for (const table of options.tables) {
        if (!have.has(table.table)) continue;
        const name = `"${table.table.replaceAll('"', '""')}"`;
        const rows = await db.$queryRawUnsafe<{ shard: number; rows: number; bytes: number }[]>(
          `WITH c AS (SELECT ${shardOfRowSql(table)} AS shard, count(*)::float8 AS n FROM ${name} GROUP BY 1)
           SELECT shard, n AS rows, n / nullif(sum(n) OVER (), 0) * pg_total_relation_size(${literal(name)})::float8 AS bytes
           FROM c WHERE shard IS NOT NULL`,
        );
        for (const r of rows) {
          const bits = Number(r.shard);
          const size = byShard.get(bits) ?? { rows: 0, bytes: 0 };
          size.rows += Number(r.rows);
          size.bytes += Math.round(Number(r.bytes ?? 0));
          byShard.set(bits, size);
        }
      }
      return [...byShard]
        .sort(([x], [y]) => x - y)
        .map(([bits, size]) => ({ shard: ShardIdentifier.fromBits(bits), database: physical.name, ...size }));
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => String(p.index), abortable: false },
  );
  return {
    sizes: result.values.flat(),
    unanswered: result.missing.map((m) => ({
      database: m.target.name,
      error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
    })),
  };
}
