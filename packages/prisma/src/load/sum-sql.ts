// The statement `sumShardLoad` sends: one database's load summed per shard over a span of its clock,
// from the windows not yet rolled up and the rollups of one resolution (`LOAD_RESOLUTIONS`: the
// coarsest whose buckets are at most a twentieth of the span, among those complete from the span's
// start by the rollups' horizons). A count is in the windows or in the rollups, never both, so every
// resolution holds all of it from its horizon on; each row is a window of its data's extent, counted
// by `windowShare`'s rule.
// The windows are read once (`w` is materialized: five parts read it) and grouped twice: per shard
// and the routers and configurations that recorded it (`labels`: the sums and the names), and per
// flush (`flushes`: the routers, each one's last skew, the median window length and the series).
// The series spreads each extent (start, end, length: every window of one flush shares it) over its
// buckets once, not each window: a window's share of a bucket depends on its extent only. Spread per window, the planner
// guessed 1,000 buckets per window and JIT-compiled the statement, which took longer than running it.
import { epochMs, mergeCtes } from "./merge-sql.js";
import { HORIZON_TABLE, LOAD_RESOLUTIONS, ROLLUP_TABLE } from "./rollup.js";
import { LOAD_TABLE } from "./sql.js";

const MS = "interval '1 millisecond'";
/** Where the statement reads rollups from (the table, or nothing on a database set up before them). */
const ROLLUP_FROM = "%ROLLUPS%";
/** Where it reads the resolutions' horizons from (the table, or nothing on a database set up before them). */
const HORIZON_FROM = "%HORIZONS%";
/** A resolution is read for spans of at least this many of its buckets. */
export const BUCKETS_PER_SPAN = 20;

const RESOLUTIONS = `(VALUES ${LOAD_RESOLUTIONS.map((r) => `(${r.bucketMs}, ${r.keepMs ?? "NULL"}::float8)`).join(", ")}) AS t(ms, keep)
  LEFT JOIN ${HORIZON_FROM} h ON h.bucket_ms = t.ms`;
// Complete from the span's start: by the horizon the rollups recorded; without one (a database no
// rollup of this version has run on yet), kept as far back as the span's start measured from its end.
const KEPT = `CASE WHEN h.bucket_ms IS NOT NULL THEN h.complete_from <= s.since
  ELSE t.keep IS NULL OR s.since >= s.until - (t.keep - t.ms) * interval '1 millisecond' END`;
/**
 * `$1` since (or null: `$3` minus `$2` ms), `$2` the span (ms), `$3` until (or null: `now()`), `$4`
 * heavy hitters kept per shard, `$5` the series' bucket (ms, or null: no series). One row: the span,
 * the resolution read, the median window length, the shards, the series (per bucket of `$5` ms since
 * the epoch) and the routers seen, each with its last skew.
 */
const SUM = `WITH span0 AS MATERIALIZED (
  SELECT u.until, COALESCE($1::timestamptz, u.until - $2::float8 * ${MS}) AS since
  FROM (SELECT COALESCE($3::timestamptz, now()) AS until) u
), span AS MATERIALIZED (
  SELECT s.until, s.since, COALESCE(
    (SELECT max(t.ms) FROM ${RESOLUTIONS} WHERE ${KEPT} AND t.ms * ${BUCKETS_PER_SPAN} <= ${epochMs("s.until - s.since")}),
    (SELECT min(t.ms) FROM ${RESOLUTIONS} WHERE ${KEPT}),
    -- None complete from the span's start: the one complete furthest back (the most of the span).
    (SELECT t.ms FROM ${RESOLUTIONS} ORDER BY COALESCE(h.complete_from, '-infinity') ASC, t.ms DESC LIMIT 1)) AS tier
  FROM span0 s
), w AS MATERIALIZED (
  SELECT x.*, ${epochMs("x.window_start")} AS s_ms, ${epochMs("x.window_end")} AS e_ms,
    CASE WHEN x.window_ms <= 0 THEN 1::float8 ELSE LEAST(1, GREATEST(0,
      ${epochMs("LEAST(x.window_end, span.until) - GREATEST(x.window_start, span.since)")} / x.window_ms)) END AS f
  FROM span, LATERAL (
    SELECT l.shard, ARRAY[l.router] AS routers, ARRAY[l.config] AS configs, l.window_start, l.window_end,
      l.window_ms::float8 AS window_ms, l.skew_ms, l.sketch, l.top, l.calls::float8 AS calls,
      l.writes::float8 AS writes, l.rows_written::float8 AS rows_written, l.db_ms, 1 AS windows, true AS raw
    FROM ${LOAD_TABLE} l WHERE l.window_end > span.since AND l.window_start < span.until
    UNION ALL
    SELECT r.shard, r.routers, r.configs, r.data_start, r.data_end, ${epochMs("r.data_end - r.data_start")},
      NULL, r.sketch, r.top, r.calls, r.writes, r.rows_written, r.db_ms, r.windows, false
    FROM ${ROLLUP_FROM} r
    WHERE r.bucket_ms = span.tier AND r.bucket_start > span.since - span.tier * ${MS} AND r.bucket_start < span.until
      AND r.data_end > span.since AND r.data_start < span.until
  ) x
), labels AS MATERIALIZED (
  SELECT shard, routers, configs, sum(calls * f) AS calls, sum(writes * f) AS writes,
    sum(rows_written * f) AS rows_written, sum(db_ms * f) AS db_ms, sum(windows) AS windows,
    min(window_start) AS first, max(window_end) AS last
  FROM w GROUP BY shard, routers, configs
), sums AS (
  SELECT shard, sum(calls) AS calls, sum(writes) AS writes, sum(rows_written) AS rows_written,
    sum(db_ms) AS db_ms, sum(windows) AS windows, ${epochMs("min(first)")} AS from_ms, ${epochMs("max(last)")} AS to_ms
  FROM labels GROUP BY shard
), names AS (
  SELECT shard, array_agg(DISTINCT r) AS routers FROM labels x, unnest(x.routers) r GROUP BY shard
), cfgs AS (
  SELECT shard, array_agg(DISTINCT c) AS configs FROM labels x, unnest(x.configs) c GROUP BY shard
), ${mergeCtes("", "w", ["shard"], "$4::int")}, flushes AS MATERIALIZED (
  SELECT routers, s_ms, e_ms, window_ms, raw, count(*) AS n, sum(calls) AS calls, sum(writes) AS writes,
    sum(db_ms) AS db_ms, max(window_end) AS last, max(skew_ms) AS skew_ms
  FROM w GROUP BY routers, s_ms, e_ms, window_ms, raw
), extents AS (
  SELECT s_ms, e_ms, window_ms, sum(calls) AS calls, sum(writes) AS writes, sum(db_ms) AS db_ms
  FROM flushes WHERE $5::float8 IS NOT NULL GROUP BY s_ms, e_ms, window_ms
), series AS (
  SELECT b, sum(g.calls * x.share) AS calls, sum(g.writes * x.share) AS writes, sum(g.db_ms * x.share) AS db_ms
  FROM extents g CROSS JOIN span
  CROSS JOIN LATERAL generate_series(
    GREATEST(floor(g.s_ms / $5::float8), floor(${epochMs("span.since")} / $5::float8))::bigint,
    LEAST(floor(GREATEST(g.e_ms - 1, g.s_ms) / $5::float8), floor(${epochMs("span.until")} / $5::float8))::bigint
  ) AS b
  CROSS JOIN LATERAL (SELECT CASE WHEN g.window_ms <= 0 THEN 1::float8
    ELSE GREATEST(0, LEAST(g.e_ms, (b + 1) * $5::float8) - GREATEST(g.s_ms, b * $5::float8)) / g.window_ms END AS share) x
  GROUP BY b
), by_routers AS (
  SELECT routers, sum(n) AS windows, max(last) AS last,
    (array_agg(skew_ms ORDER BY last DESC) FILTER (WHERE skew_ms IS NOT NULL))[1] AS skew_ms
  FROM flushes GROUP BY routers
), lengths AS (
  SELECT window_ms, sum(sum(n)) OVER (ORDER BY window_ms) AS below, sum(sum(n)) OVER () AS total
  FROM flushes WHERE raw GROUP BY window_ms
), routers AS (
  SELECT router, sum(windows) AS windows, ${epochMs("max(last)")} AS last_ms,
    (array_agg(skew_ms ORDER BY last DESC) FILTER (WHERE skew_ms IS NOT NULL))[1] AS skew_ms
  FROM by_routers, unnest(by_routers.routers) router GROUP BY router
)
SELECT ${epochMs("span.since")} AS since_ms, ${epochMs("span.until")} AS until_ms, span.tier AS tier_ms,
  COALESCE((SELECT min(window_ms) FROM lengths WHERE below >= 0.5 * total),
    (SELECT span.tier WHERE EXISTS (SELECT 1 FROM w))) AS typical_ms,
  (SELECT COALESCE(jsonb_agg(jsonb_build_object('shard', s.shard, 'calls', s.calls, 'writes', s.writes,
      'rows', s.rows_written, 'dbMs', s.db_ms, 'windows', s.windows, 'from', s.from_ms, 'to', s.to_ms,
      'routers', n.routers, 'configs', c.configs, 'sketch', COALESCE(k.buckets, '[]'), 'top', COALESCE(t.top, '[]'))
    ORDER BY s.shard), '[]') FROM sums s JOIN names n USING (shard) JOIN cfgs c USING (shard)
    LEFT JOIN sketches k USING (shard) LEFT JOIN tops t USING (shard)) AS shards,
  (SELECT COALESCE(jsonb_agg(jsonb_build_array(b, calls, writes, db_ms) ORDER BY b), '[]') FROM series) AS series,
  (SELECT COALESCE(jsonb_agg(jsonb_build_object('router', router, 'windows', windows, 'last', last_ms,
      'skewMs', skew_ms) ORDER BY router), '[]') FROM routers) AS routers
FROM span`;

/** No horizons: an empty relation of their shape. */
const NO_HORIZONS = "(SELECT NULL::int AS bucket_ms, NULL::timestamptz AS complete_from WHERE false)";

/** The statement, reading the rollups' table and their horizons. */
export const SUM_LOAD = SUM.replaceAll(ROLLUP_FROM, ROLLUP_TABLE).replaceAll(HORIZON_FROM, HORIZON_TABLE);

/** The statement on a database whose rollups were set up by an earlier version (no horizons' table yet). */
export const SUM_KEPT = SUM.replaceAll(ROLLUP_FROM, ROLLUP_TABLE).replaceAll(HORIZON_FROM, NO_HORIZONS);

/** The statement on a database set up by an earlier version (windows only, no rollups' table yet). */
export const SUM_WINDOWS = SUM.replaceAll(HORIZON_FROM, NO_HORIZONS).replaceAll(
  ROLLUP_FROM,
  `(SELECT NULL::int AS bucket_ms, NULL::timestamptz AS bucket_start, NULL::int AS shard,
    NULL::timestamptz AS data_start, NULL::timestamptz AS data_end, NULL::float8 AS calls, NULL::float8 AS writes,
    NULL::float8 AS rows_written, NULL::float8 AS db_ms, NULL::int AS windows, NULL::jsonb AS sketch,
    NULL::jsonb AS top, NULL::text[] AS routers, NULL::text[] AS configs WHERE false)`,
);
