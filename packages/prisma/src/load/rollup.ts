// Downsampled load history: routers' windows merged across routers into buckets of 10 s, 1 min,
// 10 min and 1 h, so a read costs one row per shard and bucket whatever the number of routers. Whichever
// router flushes rolls up (one at a time per database, under an advisory lock): windows whose end is
// past the lag are moved out of `shardkit."ShardLoad"` into every resolution at once, in one
// transaction, so each count is in the windows or in the rollups, never both and never neither.
import { LOCKS } from "../shared.js";
import { epochMs, mergeCtes } from "./merge-sql.js";
import { JIT_OFF } from "./no-jit.js";
import { SKETCH_ALPHA, SKETCH_MIN_MS } from "./sketch.js";
import { LOAD_TABLE, MOVED_KEPT_MS, MOVED_TABLE } from "./sql.js";

/** The rollups' table, beside the windows'. */
export const ROLLUP_TABLE = 'shardkit."ShardLoadRollup"';
/**
 * How far back each resolution holds every count rolled up: `complete_from` (a bucket boundary, or
 * `-infinity`) per `bucket_ms`. Set by the rollup in the transaction that first fills the resolution
 * or deletes its old buckets; the read takes only a resolution complete from the span's start.
 */
export const HORIZON_TABLE = 'shardkit."ShardLoadHorizon"';
/** Its working table (unlogged; rows live only inside one rollup's transaction). */
const PARTS = 'shardkit."ShardLoadRollupParts"';

/** A resolution of the rollups: its bucket (ms, a multiple of 10 s) and how long its buckets are kept (ms; null: `retainMs`). */
export interface LoadResolution {
  bucketMs: number;
  keepMs: number | null;
}

/** 10 s buckets kept an hour, 1 min buckets a day, 10 min and 1 h buckets for `retainMs` (default 30 days). */
export const LOAD_RESOLUTIONS: readonly LoadResolution[] = Object.freeze([
  { bucketMs: 10_000, keepMs: 3_600_000 },
  { bucketMs: 60_000, keepMs: 86_400_000 },
  { bucketMs: 600_000, keepMs: null },
  { bucketMs: 3_600_000, keepMs: null },
]);

/**
 * A window is rolled up once it ended this long ago, or three of its own lengths if longer, so a
 * batch sent again at its router's next flush (its statement failed, or its answer was lost) usually
 * replaces its first copy in the windows; one sent again later, after a rollup moved the first copy,
 * is recognised by its key among the batches moved (`MOVED_TABLE`, kept `MOVED_KEPT_MS`) and skipped.
 */
export const ROLLUP_LAG_MS = 30_000;
/** At most this many windows move in one rollup (the first one after an upgrade finds a day of them). */
const ROLLUP_BATCH = 100_000;
const MS = "interval '1 millisecond'";

export const CREATE_ROLLUP_TABLES = [
  `CREATE TABLE IF NOT EXISTS ${ROLLUP_TABLE} (
  bucket_ms integer NOT NULL,
  bucket_start timestamptz NOT NULL,
  shard integer NOT NULL,
  data_start timestamptz NOT NULL,
  data_end timestamptz NOT NULL,
  calls double precision NOT NULL,
  writes double precision NOT NULL,
  rows_written double precision NOT NULL,
  db_ms double precision NOT NULL,
  windows integer NOT NULL,
  sketch jsonb NOT NULL,
  top jsonb NOT NULL,
  routers text[] NOT NULL,
  configs text[] NOT NULL,
  CONSTRAINT "ShardLoadRollup_pkey" PRIMARY KEY (bucket_ms, bucket_start, shard)
)`,
  `CREATE TABLE IF NOT EXISTS ${HORIZON_TABLE} (
  bucket_ms integer NOT NULL PRIMARY KEY,
  complete_from timestamptz NOT NULL
)`,
  `CREATE TABLE IF NOT EXISTS ${MOVED_TABLE} (
  router_start timestamptz NOT NULL,
  router text NOT NULL,
  moved_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT "ShardLoadMoved_pkey" PRIMARY KEY (router_start, router)
)`,
  // An earlier version's table: its rows take the time of this set-up (kept a day from now, longer
  // than they were), and an earlier version's rollup, still run by routers not yet upgraded, leaves
  // the default in the rows it adds.
  `ALTER TABLE ${MOVED_TABLE} ADD COLUMN IF NOT EXISTS moved_at timestamptz NOT NULL DEFAULT now()`,
  `CREATE INDEX IF NOT EXISTS "ShardLoadMoved_moved_at_idx" ON ${MOVED_TABLE} (moved_at)`,
  `CREATE UNLOGGED TABLE IF NOT EXISTS ${PARTS} (
  kind integer NOT NULL, shard integer NOT NULL, b10 bigint NOT NULL, f double precision NOT NULL,
  whole boolean NOT NULL, s_ms double precision NOT NULL, e_ms double precision NOT NULL,
  calls double precision NOT NULL, writes double precision NOT NULL, rows_written double precision NOT NULL,
  db_ms double precision NOT NULL, windows integer NOT NULL, sketch jsonb NOT NULL, top jsonb NOT NULL,
  routers text[] NOT NULL, configs text[] NOT NULL
)`,
];

/**
 * Moves the windows past the lag (at most a batch, oldest first) into `PARTS`, each cut into the
 * 10 s buckets it covers, its counts spread evenly over its length (`windowShare`'s rule); its
 * latency sketch stays whole, in the bucket of its middle.
 */
const MOVE_WINDOWS = `WITH m AS (
    DELETE FROM ${LOAD_TABLE} l WHERE (l.shard, l.router, l.router_start) IN (
      SELECT shard, router, router_start FROM ${LOAD_TABLE}
      WHERE window_end <= as_of - ${ROLLUP_LAG_MS} * ${MS}
        AND window_end <= as_of - GREATEST(${ROLLUP_LAG_MS}, 3 * window_ms) * ${MS}
      ORDER BY window_end LIMIT ${ROLLUP_BATCH})
    RETURNING l.*
  ), seen AS (
    INSERT INTO ${MOVED_TABLE} (router_start, router, moved_at) SELECT DISTINCT router_start, router, now() FROM m
    ON CONFLICT DO NOTHING
  ), x AS (SELECT m.*, ${epochMs("m.window_start")} AS s, ${epochMs("m.window_start")} + m.window_ms AS e FROM m)
  INSERT INTO ${PARTS}
  SELECT 0, x.shard, b, y.share, b = floor((x.s + GREATEST(x.window_ms, 0) / 2.0) / 10000)::bigint,
    GREATEST(x.s, b * 10000.0), LEAST(GREATEST(x.e, x.s), (b + 1) * 10000.0),
    x.calls, x.writes, x.rows_written, x.db_ms, 1, x.sketch, x.top, ARRAY[x.router], ARRAY[x.config]
  FROM x CROSS JOIN LATERAL generate_series(floor(x.s / 10000)::bigint, floor(GREATEST(x.e - 1, x.s) / 10000)::bigint) b
  CROSS JOIN LATERAL (SELECT CASE WHEN x.window_ms <= 0 THEN 1::float8
    ELSE GREATEST(0, LEAST(x.e, (b + 1) * 10000.0) - GREATEST(x.s, b * 10000.0)) / x.window_ms END AS share) y`;

/** The rows already in resolution `tier` for the buckets the moved windows touch, taken out to be merged with them. */
const TAKE_BUCKETS = `WITH old AS (
    DELETE FROM ${ROLLUP_TABLE} r
    USING (SELECT DISTINCT shard, floor(b10 * 10000.0 / tier)::bigint AS b FROM ${PARTS} WHERE kind = 0) k
    WHERE r.bucket_ms = tier AND r.shard = k.shard AND r.bucket_start = to_timestamp(k.b * tier / 1000.0)
    RETURNING r.*
  )
  INSERT INTO ${PARTS}
  SELECT tier, shard, floor(${epochMs("bucket_start")} / 10000)::bigint, 1, true, ${epochMs("data_start")},
    ${epochMs("data_end")}, calls, writes, rows_written, db_ms, windows, sketch, top, routers, configs
  FROM old`;

/** The buckets of resolution `tier`, summed from the moved windows and the rows taken out. */
const WRITE_BUCKETS = `INSERT INTO ${ROLLUP_TABLE}
  WITH p AS (
    SELECT ${PARTS}.*, floor(b10 * 10000.0 / tier)::bigint AS b FROM ${PARTS} WHERE kind = 0 OR kind = tier
  ), sums AS (
    SELECT shard, b, sum(calls * f) AS calls, sum(writes * f) AS writes, sum(rows_written * f) AS rows_written,
      sum(db_ms * f) AS db_ms, sum(windows)::int AS windows, min(s_ms) AS s_ms, max(e_ms) AS e_ms
    FROM p GROUP BY shard, b
  ), names AS (
    SELECT shard, b, array_agg(DISTINCT r ORDER BY r) AS routers FROM p, unnest(p.routers) r GROUP BY shard, b
  ), cfgs AS (
    SELECT shard, b, array_agg(DISTINCT c ORDER BY c) AS configs FROM p, unnest(p.configs) c GROUP BY shard, b
  ), ${mergeCtes("r_", "p", ["shard", "b"], "top_keys", "w.whole")}
  SELECT tier, to_timestamp(s.b * tier / 1000.0), s.shard, to_timestamp(s.s_ms / 1000), to_timestamp(s.e_ms / 1000),
    s.calls, s.writes, s.rows_written, s.db_ms, s.windows,
    jsonb_build_object('alpha', ${SKETCH_ALPHA}, 'min', ${SKETCH_MIN_MS}, 'buckets', COALESCE(k.buckets, '[]')),
    COALESCE(t.top, '[]'), n.routers, c.configs
  FROM sums s JOIN names n USING (shard, b) JOIN cfgs c USING (shard, b)
    LEFT JOIN r_sketches k USING (shard, b) LEFT JOIN r_tops t USING (shard, b)`;

const ms = (t: string) => `${t} * ${MS}`;
const keep = (r: LoadResolution) => (r.keepMs === null ? "retain_ms" : String(r.keepMs));
/** `t` rounded up to a boundary of `tier` ms buckets. */
const ceilTo = (t: string, tier: string) => `to_timestamp(ceil(${epochMs(t)} / ${tier}) * ${tier} / 1000.0)`;

/**
 * A horizon for each resolution without one, before this rollup writes: complete from its oldest
 * bucket (made by an earlier version, which deleted older ones), or, when it has none while others
 * do (a resolution new to this database), from the end of what was rolled up before it; from the
 * start (`-infinity`) on a database with no rollups yet.
 */
const FIRST_HORIZONS = `INSERT INTO ${HORIZON_TABLE} (bucket_ms, complete_from)
  SELECT t.ms, COALESCE(
    (SELECT min(r.bucket_start) FROM ${ROLLUP_TABLE} r WHERE r.bucket_ms = t.ms),
    (SELECT ${ceilTo("max(r.data_end)", "t.ms")} FROM ${ROLLUP_TABLE} r),
    '-infinity')
  FROM (VALUES ${LOAD_RESOLUTIONS.map((r) => `(${r.bucketMs})`).join(", ")}) t(ms)
  WHERE NOT EXISTS (SELECT 1 FROM ${HORIZON_TABLE} h WHERE h.bucket_ms = t.ms)
  ON CONFLICT (bucket_ms) DO NOTHING`;

/** Buckets of `r` older than it keeps deleted, its horizon moved past the last of them, in one statement. */
const expire = (r: LoadResolution) => `WITH gone AS (
    DELETE FROM ${ROLLUP_TABLE} WHERE bucket_ms = ${r.bucketMs} AND bucket_start < as_of - ${ms(keep(r))}
    RETURNING bucket_start
  )
  UPDATE ${HORIZON_TABLE} h SET complete_from = GREATEST(h.complete_from, g.last + ${ms(String(r.bucketMs))})
  FROM (SELECT max(bucket_start) AS last FROM gone) g
  WHERE h.bucket_ms = ${r.bucketMs} AND g.last IS NOT NULL`;

/**
 * The rollup function's version, in its name: a router's set-up replaces the function of its own
 * version only, so during a rolling upgrade a router of an earlier version (whose set-up replaces
 * `shardkit.load_rollup`, the first version's) never puts its body in place of a later one, and each
 * router runs its own version's rollup. Bump it with any change to the function's body.
 */
export const ROLLUP_VERSION = 2;
export const ROLLUP_FUNCTION_NAME = `shardkit.load_rollup_v${ROLLUP_VERSION}`;

/**
 * `load_rollup_v2(retain_ms, top_keys, as_of)`: one rollup at `as_of` (default: the database's
 * `now()`), or -1 when another one holds the lock (it is doing the same work). Returns the windows
 * moved. Buckets older than their resolution keeps are deleted, and its horizon moved past them; the
 * batches moved are remembered `MOVED_KEPT_MS` from their move, by the database's clock.
 */
export const ROLLUP_FUNCTION = `CREATE OR REPLACE FUNCTION ${ROLLUP_FUNCTION_NAME}(
  retain_ms double precision, top_keys integer DEFAULT 16, as_of timestamptz DEFAULT now()
) RETURNS integer LANGUAGE plpgsql SET ${JIT_OFF} AS $fn$
DECLARE
  moved integer;
  tier integer;
BEGIN
  IF NOT pg_try_advisory_xact_lock(${LOCKS.loadRollup}, 0) THEN RETURN -1; END IF;
  -- A flush names the batches moved in its statement: locked so, it waits for this rollup's end
  -- before its snapshot is taken, and sees the batches this one moves (a batch sent again while its
  -- first copy is being moved would otherwise not see the move, and be written again beside it).
  LOCK TABLE ${MOVED_TABLE} IN ACCESS EXCLUSIVE MODE;
  ${FIRST_HORIZONS};
  DELETE FROM ${PARTS};
  ${MOVE_WINDOWS};
  SELECT count(*) INTO moved FROM ${PARTS} WHERE whole;
  -- Its size now, for the plans of what follows (it was empty when last analyzed).
  IF moved > 0 THEN ANALYZE ${PARTS}; END IF;
  IF moved > 0 THEN
    FOREACH tier IN ARRAY ARRAY[${LOAD_RESOLUTIONS.map((r) => r.bucketMs).join(", ")}] LOOP
      ${TAKE_BUCKETS};
      ${WRITE_BUCKETS};
    END LOOP;
    DELETE FROM ${PARTS};
  END IF;
${LOAD_RESOLUTIONS.map((r) => `  ${expire(r)};`).join("\n")}
  DELETE FROM ${MOVED_TABLE} WHERE moved_at < as_of - ${ms(String(MOVED_KEPT_MS))};
  RETURN moved;
END
$fn$`;

/** `SELECT shardkit.load_rollup_v2($1, $2)`: what a router's flush runs now and then. */
export const ROLL_UP = `SELECT ${ROLLUP_FUNCTION_NAME}($1::float8, $2::int) AS moved`;

type RawQuery = { $queryRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown> };

/**
 * Rolls one database's load windows up now (what routers do as they flush): the windows moved, or
 * -1 when another rollup was running there. `retainMs`: how long 10 min buckets are kept.
 */
export async function rollUpLoad(
  client: RawQuery,
  options: { retainMs?: number; topKeys?: number } = {},
): Promise<number> {
  const rows = (await client.$queryRawUnsafe(
    ROLL_UP,
    options.retainMs ?? 30 * 86_400_000,
    options.topKeys ?? 16,
  )) as { moved: unknown }[];
  return Number(rows[0]?.moved ?? 0);
}
