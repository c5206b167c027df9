// The table a router's load windows go to, on each database: its DDL, the one statement a flush
// sends (upsert the windows, expire old ones), the read of its windows and their sum per shard.

/** The table, in shardkit's own PostgreSQL schema (beside `shardkit."ShardkitSchema"`, never in the app's). */
export const LOAD_TABLE = 'shardkit."ShardLoad"';

/** A window's end: its start plus its length (immutable: a length in ms has no days or months to shift). */
const WINDOW_END = `CREATE OR REPLACE FUNCTION shardkit.load_window_end(start timestamptz, ms integer)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT start + ms * interval '1 millisecond' $$`;

/**
 * Made on a database's first flush (each `IF NOT EXISTS`: routers racing are fine). A window's
 * `window_start` (and so `window_end`) is the database's clock: the flush moves the router's own
 * stamp, kept in `router_start`, by the router's clock skew, `skew_ms`. Both are null in rows
 * written without the router's clock. A table made by an earlier version gets the columns it lacks.
 */
export const CREATE_LOAD_TABLE = [
  "CREATE SCHEMA IF NOT EXISTS shardkit",
  WINDOW_END,
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
  `ALTER TABLE ${LOAD_TABLE}
  ADD COLUMN IF NOT EXISTS window_end timestamptz
    GENERATED ALWAYS AS (shardkit.load_window_end(window_start, window_ms)) STORED,
  ADD COLUMN IF NOT EXISTS router_start timestamptz,
  ADD COLUMN IF NOT EXISTS skew_ms double precision`,
  // A retry of a window is found by its router's own stamp (the database's moves with each send).
  `CREATE UNIQUE INDEX IF NOT EXISTS "ShardLoad_router_start_key" ON ${LOAD_TABLE} (shard, router, router_start)`,
  `CREATE INDEX IF NOT EXISTS "ShardLoad_window_start_idx" ON ${LOAD_TABLE} (window_start)`,
  `CREATE INDEX IF NOT EXISTS "ShardLoad_window_end_idx" ON ${LOAD_TABLE} (window_end)`,
];

/** One row of the table as a flush sends it (in the JSON of `$1`). */
export interface LoadRow {
  shard: number;
  /** The window's start by the router's clock. */
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
  /**
   * The router's clock when it sent the flush: the window is moved by the difference from the
   * database's (`now()`), so it is stamped by the database's clock. Without it (rows written by
   * hand), `window_start` is taken as the database's clock.
   */
  sent_at?: string;
}

const VALUES = "calls, writes, rows_written, db_ms, sketch, top, config";

/**
 * A flush: `$1` the rows (JSON), `$2` the expiry cutoff (by the router's clock, moved like the
 * windows). A row sent again (a retry after a flush whose answer did not arrive in time) replaces
 * itself, found by its router's own stamp: the counts it carries are the whole of its window, never
 * an increment. Windows that started before the cutoff are deleted (any router's).
 */
export const FLUSH_LOAD = `WITH input AS (
  SELECT r.*, COALESCE(now() - r.sent_at, interval '0') AS shift
  FROM jsonb_to_recordset($1::jsonb) AS r(
    shard integer, window_start timestamptz, window_ms integer, router text, calls bigint, writes bigint,
    rows_written bigint, db_ms double precision, sketch jsonb, top jsonb, config text, sent_at timestamptz
  )
), expired AS (
  DELETE FROM ${LOAD_TABLE}
  WHERE window_start < $2::timestamptz + COALESCE((SELECT max(shift) FROM input), interval '0')
)
INSERT INTO ${LOAD_TABLE} (shard, window_start, window_ms, router, router_start, skew_ms, ${VALUES})
SELECT shard, window_start + shift, window_ms, router, window_start, CASE WHEN sent_at IS NULL THEN NULL ELSE extract(epoch FROM -shift) * 1000 END,
  ${VALUES}
FROM input
ON CONFLICT (shard, router, router_start) DO UPDATE SET
  window_start = EXCLUDED.window_start, window_ms = EXCLUDED.window_ms,
  skew_ms = EXCLUDED.skew_ms, calls = EXCLUDED.calls, writes = EXCLUDED.writes,
  rows_written = EXCLUDED.rows_written, db_ms = EXCLUDED.db_ms, sketch = EXCLUDED.sketch,
  top = EXCLUDED.top, config = EXCLUDED.config`;

/**
 * The windows that started at or after `$1` (and before `$2` unless null), oldest first; with `$3`
 * true, those that end after `$1` (a window a failed flush kept and lengthened started earlier).
 */
export const READ_LOAD = `SELECT shard, window_start, window_ms, router, calls::float8 AS calls, writes::float8 AS writes,
  rows_written::float8 AS rows_written, db_ms, sketch, top, config, skew_ms
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
