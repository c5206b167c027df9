// The table a router's load windows go to, on each database (made by schema.ts): the one statement
// a flush sends (upsert the windows, expire old ones) and the read of its windows.

/** The table, in shardkit's own PostgreSQL schema (beside `shardkit."ShardkitSchema"`, never in the app's). */
export const LOAD_TABLE = 'shardkit."ShardLoad"';

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

/**
 * The batches a rollup moved out of the table, by their key (`router`, `router_start`: a router's own
 * stamp of a batch's first window, one per batch and database) and when (`moved_at`, the database's
 * clock), kept `MOVED_KEPT_MS` from then: a batch sent again after its first copy was rolled up is
 * recognised and not counted twice.
 */
export const MOVED_TABLE = 'shardkit."ShardLoadMoved"';
/** How long a rollup remembers the batches it moved (ms from the move, by the database's clock). */
export const MOVED_KEPT_MS = 86_400_000;
/**
 * How long a router sends a batch again (ms from its first send, by the router's clock). A batch is
 * moved after its first send, so the database remembers it at least `MOVED_KEPT_MS` from that send:
 * two spans measured each by one clock, never one clock's time compared with the other's, so no
 * skew lets a router send again a batch the database forgot. The other half of the day is the
 * margin for a router's clock that runs fast or steps forward.
 */
export const RESEND_FOR_MS = MOVED_KEPT_MS / 2;

const VALUES = "calls, writes, rows_written, db_ms, sketch, top, config";

/**
 * A flush: `$1` the rows (JSON), `$2` the expiry cutoff (by the router's clock, moved like the
 * windows). A batch is sent again as it was, under the same key (its router's own stamp), when the
 * outcome of its statement is not known (a failure, a lost answer): a copy still in the table is
 * replaced by itself, a copy a rollup moved already (`MOVED_TABLE`) is skipped, so it counts once.
 * Windows that started before the cutoff are deleted (any router's).
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
WHERE NOT EXISTS (SELECT 1 FROM ${MOVED_TABLE} m WHERE m.router_start = input.window_start AND m.router = input.router)
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
