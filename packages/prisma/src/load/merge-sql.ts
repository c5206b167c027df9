// The SQL that merges load rows per group, written once for the read (`sumShardLoad`, grouped by
// shard) and the rollup (grouped by shard and bucket): latency sketches added bucket by bucket, heavy
// hitters merged as `mergeTopKeys` merges them (a key absent from a full list may have been seen up
// to that list's smallest count there). Each row's counts are scaled by its share `f`.
import { SKETCH_ALPHA, SKETCH_MIN_MS } from "./sketch.js";

/**
 * A timestamp (or interval) in ms: what `(extract(epoch FROM t) * 1000)::float8` gives, to the bit,
 * at a fraction of its cost (`extract` computes in numeric): `date_part`'s float8 seconds are within
 * a tenth of a microsecond of the exact value up to the year 2100, so rounded to whole microseconds
 * they are exact, and divided by 1000 they are the float8 nearest the exact ms, as the cast gives.
 */
export const epochMs = (t: string) => `(round(date_part('epoch', ${t}) * 1000000) / 1000)`;

/**
 * CTEs over `source` (with `sketch`, `top`, `f` and the `group` columns): `<p>sketches` (group,
 * `buckets`: `[[index, count], ...]` of the rows where `whole` holds) and `<p>tops` (group, `top`:
 * the `k` heaviest keys, heaviest first, ties by key). `k` is SQL (a parameter or a variable).
 */
export function mergeCtes(
  p: string,
  source: string,
  group: readonly string[],
  k: string,
  whole = "true",
): string {
  const g = group.join(", ");
  const on = group.map((c) => `k.${c}`).join(", ");
  const n = group.length;
  const list = (upTo: number) => Array.from({ length: upTo }, (_, i) => i + 1).join(", ");
  return `${p}buckets AS (
  SELECT ${group.map((c) => `w.${c}`).join(", ")}, (sb->>0)::int AS i, sum((sb->>1)::float8) AS n
  FROM ${source} w, jsonb_array_elements(w.sketch->'buckets') sb
  WHERE ${whole} AND (w.sketch->>'alpha')::float8 = ${SKETCH_ALPHA} AND (w.sketch->>'min')::float8 = ${SKETCH_MIN_MS}
  GROUP BY ${list(n + 1)}
), ${p}sketches AS MATERIALIZED (
  SELECT ${g}, jsonb_agg(jsonb_build_array(i, n) ORDER BY i) AS buckets FROM ${p}buckets GROUP BY ${g}
), ${p}lists AS (
  SELECT ${group.map((c) => `w.${c}`).join(", ")}, w.f, w.top, jsonb_array_length(w.top) >= ${k} AS is_full,
    CASE WHEN jsonb_array_length(w.top) >= ${k}
      THEN (SELECT min((e->>'count')::float8) FROM jsonb_array_elements(w.top) e) END AS low
  FROM ${source} w WHERE jsonb_typeof(w.top) = 'array' AND jsonb_array_length(w.top) > 0
), ${p}floors AS (
  SELECT ${g}, COALESCE(sum(low * f) FILTER (WHERE is_full), 0) AS total FROM ${p}lists GROUP BY ${g}
), ${p}keys AS (
  SELECT ${group.map((c) => `t.${c}`).join(", ")}, e->>'key' AS key, sum((e->>'count')::float8 * t.f) AS count,
    sum((e->>'error')::float8 * t.f) AS error, COALESCE(sum(t.low * t.f) FILTER (WHERE t.is_full), 0) AS held
  FROM ${p}lists t, jsonb_array_elements(t.top) e GROUP BY ${list(n + 1)}
), ${p}ranked AS (
  SELECT ${on}, k.key, k.count + fl.total - k.held AS count, k.error + fl.total - k.held AS error,
    row_number() OVER (PARTITION BY ${on} ORDER BY k.count + fl.total - k.held DESC, k.key COLLATE "C") AS rank
  FROM ${p}keys k JOIN ${p}floors fl USING (${g})
), ${p}tops AS MATERIALIZED (
  SELECT ${g}, jsonb_agg(jsonb_build_object('key', key, 'count', count, 'error', error) ORDER BY rank) AS top
  FROM ${p}ranked WHERE rank <= ${k} GROUP BY ${g}
)`;
}
