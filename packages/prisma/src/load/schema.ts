// Setting the load ledger up on a database: the windows' table, the rollups' tables and the rollup
// function, in one statement under an advisory lock (routers starting together wait for each other),
// changing a table an earlier version made into the shape this one writes.
import { LOCKS } from "../shared.js";
import { CREATE_ROLLUP_TABLES, HORIZON_TABLE, ROLLUP_FUNCTION, ROLLUP_TABLE } from "./rollup.js";
import { LOAD_TABLE, MOVED_TABLE } from "./sql.js";

/** A window's end: its start plus its length (immutable: a length in ms has no days or months to shift). */
const WINDOW_END = `CREATE OR REPLACE FUNCTION shardkit.load_window_end(start timestamptz, ms integer)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT start + ms * interval '1 millisecond' $$`;

/**
 * A window's `window_start` (and so `window_end`) is the database's clock: the flush moves the
 * router's own stamp, kept in `router_start`, by the router's clock skew, `skew_ms` (null in rows
 * written without the router's clock). A retry of a window is found by its router's own stamp, so
 * the primary key is `(shard, router, router_start)`.
 */
const WINDOWS_TABLE = `CREATE TABLE IF NOT EXISTS ${LOAD_TABLE} (
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
  router_start timestamptz NOT NULL,
  skew_ms double precision,
  CONSTRAINT "ShardLoad_router_start_key" PRIMARY KEY (shard, router, router_start)
)`;

/**
 * A table of an earlier version: the columns it lacks, then its primary key `(shard, window_start,
 * router)` (which two retries of one window stamped alike by the database would break) replaced by
 * the key retries are found by. Rows written without the router's clock take their database stamp.
 */
const UPGRADE = `ALTER TABLE ${LOAD_TABLE}
    ADD COLUMN IF NOT EXISTS window_end timestamptz
      GENERATED ALWAYS AS (shardkit.load_window_end(window_start, window_ms)) STORED,
    ADD COLUMN IF NOT EXISTS router_start timestamptz,
    ADD COLUMN IF NOT EXISTS skew_ms double precision;
  SELECT conname INTO old_key FROM pg_constraint
  WHERE conrelid = '${LOAD_TABLE}'::regclass AND contype = 'p' AND conname <> 'ShardLoad_router_start_key';
  IF old_key IS NOT NULL THEN
    DELETE FROM ${LOAD_TABLE} a WHERE a.router_start IS NULL AND EXISTS (SELECT 1 FROM ${LOAD_TABLE} b
      WHERE b.shard = a.shard AND b.router = a.router AND b.router_start = a.window_start);
    UPDATE ${LOAD_TABLE} SET router_start = window_start WHERE router_start IS NULL;
    EXECUTE format('ALTER TABLE ${LOAD_TABLE} DROP CONSTRAINT %I', old_key);
    CREATE UNIQUE INDEX IF NOT EXISTS "ShardLoad_router_start_key" ON ${LOAD_TABLE} (shard, router, router_start);
    ALTER TABLE ${LOAD_TABLE} ADD CONSTRAINT "ShardLoad_router_start_key" PRIMARY KEY USING INDEX "ShardLoad_router_start_key";
  END IF`;

/**
 * Made on a database's first flush, and again by a router whose rollup finds them missing or of an
 * earlier version: one `DO` statement, so a router stopped halfway leaves nothing half made.
 */
export const CREATE_LOAD_TABLE = [
  `DO $do$
DECLARE
  old_key name;
BEGIN
  PERFORM pg_advisory_xact_lock(${LOCKS.loadSetup}, 0);
  CREATE SCHEMA IF NOT EXISTS shardkit;
  ${WINDOW_END};
  ${WINDOWS_TABLE};
  ${UPGRADE};
  CREATE INDEX IF NOT EXISTS "ShardLoad_window_start_idx" ON ${LOAD_TABLE} (window_start);
  CREATE INDEX IF NOT EXISTS "ShardLoad_window_end_idx" ON ${LOAD_TABLE} (window_end);
  ${CREATE_ROLLUP_TABLES.join(";\n  ")};
  ${ROLLUP_FUNCTION};
END
$do$`,
];

/**
 * Drops every table of the load ledger on a database (windows, rollups, their horizons, the batches
 * moved): all its load history, for tests that each start from none. The next flush or rollup makes
 * them again.
 */
export const DROP_LOAD_TABLES = `DROP TABLE IF EXISTS ${LOAD_TABLE}, ${ROLLUP_TABLE}, ${HORIZON_TABLE}, ${MOVED_TABLE}`;
