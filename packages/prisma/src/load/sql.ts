// The table a router's load windows go to, on each database: its DDL, the one statement a flush
// sends (upsert the windows, expire old ones) and the read.

/** The table, in shardkit's own PostgreSQL schema (beside `shardkit."ShardkitSchema"`, never in the app's). */
export const LOAD_TABLE = 'shardkit."ShardLoad"';

/** Made on a database's first flush (each `IF NOT EXISTS`: routers racing are fine). */
export const CREATE_LOAD_TABLE = [
  "CREATE SCHEMA IF NOT EXISTS shardkit",
  `CREATE TABLE IF NOT EXISTS ${LOAD_TABLE} (
  shard integer NOT NULL,
  window_start timestamptz NOT NULL,
  window_ms integer NOT NULL,
  router text NOT NULL,
  calls bigint NOT NULL,
  writes bigint NOT NULL,
  rows_written bigint NOT NULL,
  db_ms double precision NOT NULL,
  sketch jsonb NOT NULL,
  top jsonb NOT NULL,
  config text NOT NULL,
  PRIMARY KEY (shard, window_start, router)
)`,
  `CREATE INDEX IF NOT EXISTS "ShardLoad_window_start_idx" ON ${LOAD_TABLE} (window_start)`,
];

/** One row of the table as a flush sends it (in the JSON of `$1`). */
export interface LoadRow {
  shard: number;
  window_start: string;
  window_ms: number;
  router: string;
  calls: number;
  writes: number;
  rows_written: number;
  db_ms: number;
  sketch: unknown;
  top: unknown;
  config: string;
}

const COLUMNS =
  "shard, window_start, window_ms, router, calls, writes, rows_written, db_ms, sketch, top, config";

/**
 * A flush: `$1` the rows (JSON), `$2` the expiry cutoff. A row sent again (a retry after a flush
 * whose answer did not arrive in time) replaces itself: the counts it carries are the whole of its
 * window, never an increment. Windows that started before the cutoff are deleted (any router's).
 */
export const FLUSH_LOAD = `WITH expired AS (
  DELETE FROM ${LOAD_TABLE} WHERE window_start < $2::timestamptz
)
INSERT INTO ${LOAD_TABLE} (${COLUMNS})
SELECT ${COLUMNS} FROM jsonb_to_recordset($1::jsonb) AS r(
  shard integer, window_start timestamptz, window_ms integer, router text, calls bigint, writes bigint,
  rows_written bigint, db_ms double precision, sketch jsonb, top jsonb, config text
)
ON CONFLICT (shard, window_start, router) DO UPDATE SET
  window_ms = EXCLUDED.window_ms, calls = EXCLUDED.calls, writes = EXCLUDED.writes,
  rows_written = EXCLUDED.rows_written, db_ms = EXCLUDED.db_ms, sketch = EXCLUDED.sketch,
  top = EXCLUDED.top, config = EXCLUDED.config`;

/**
 * The windows that started at or after `$1` (and before `$2` unless null), oldest first; with `$3`
 * true, those that end after `$1` (a window a failed flush kept and lengthened started earlier).
 */
export const READ_LOAD = `SELECT shard, window_start, window_ms, router, calls::float8 AS calls, writes::float8 AS writes,
  rows_written::float8 AS rows_written, db_ms, sketch, top, config
FROM ${LOAD_TABLE}
WHERE CASE WHEN $3::boolean
  THEN window_start + window_ms * interval '1 millisecond' > $1::timestamptz
  ELSE window_start >= $1::timestamptz END
  AND ($2::timestamptz IS NULL OR window_start < $2::timestamptz)
ORDER BY window_start, shard, router`;

/** Whether `error` says the table (or its schema) does not exist. */
export function missingLoadTable(error: unknown): boolean {
  const e = error as { cause?: { kind?: unknown; originalCode?: unknown }; message?: unknown } | undefined;
  return (
    e?.cause?.kind === "TableDoesNotExist" ||
    e?.cause?.originalCode === "42P01" ||
    e?.cause?.originalCode === "3F000" ||
    /relation "[^"]*ShardLoad" does not exist/.test(String(e?.message ?? ""))
  );
}
