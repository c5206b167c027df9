import { UnsupportedShardOperationError } from "./errors.js";

type Row = Record<string, unknown>;
type Direction = { desc: boolean; nullsFirst: boolean };

/**
 * A comparator over rows from a Prisma `orderBy` on scalar fields, with PostgreSQL's defaults
 * (ascending: nulls last; descending: nulls first). Strings compare by UTF-16 code unit, which
 * matches the database only under a byte-order collation ("C") or for IDs and ASCII keys.
 */
export function orderByComparator(orderBy: unknown): (a: Row, b: Row) => number {
  const terms: [string, Direction][] = [];
  for (const entry of Array.isArray(orderBy) ? orderBy : orderBy ? [orderBy] : []) {
    for (const [field, spec] of Object.entries(entry as Row)) {
      if (spec === "asc" || spec === "desc") {
        terms.push([field, { desc: spec === "desc", nullsFirst: spec === "desc" }]);
      } else if (spec && typeof spec === "object" && "sort" in spec) {
        const { sort, nulls } = spec as { sort: string; nulls?: string };
        const desc = sort === "desc";
        terms.push([field, { desc, nullsFirst: nulls ? nulls === "first" : desc }]);
      } else {
        throw new UnsupportedShardOperationError(
          `orderBy ${field}: only scalar fields can be ordered across shards (relation and aggregate ordering would need every row)`,
        );
      }
    }
  }
  return (a, b) => {
    for (const [field, { desc, nullsFirst }] of terms) {
      const x = a[field];
      const y = b[field];
      if (x == null || y == null) {
        if (x == null && y == null) continue;
        return (x == null) === nullsFirst ? -1 : 1;
      }
      const c = compareValues(x, y);
      if (c !== 0) return desc ? -c : c;
    }
    return 0;
  };
}

/** Orders numbers, bigints, strings, Dates, booleans and Prisma Decimals (anything with `cmp`). */
export function compareValues(x: unknown, y: unknown): number {
  if (x instanceof Date && y instanceof Date) return Math.sign(x.getTime() - y.getTime());
  if (typeof x === "object" && x !== null && typeof (x as { cmp?: unknown }).cmp === "function") {
    return (x as { cmp(o: unknown): number }).cmp(y);
  }
  if ((typeof x === "number" || typeof x === "bigint") && (typeof y === "number" || typeof y === "bigint")) {
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const a = x as string | boolean;
  const b = y as string | boolean;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Adds two aggregate values of the same column (numbers, bigints or Decimals); null is "no rows". */
function add(x: unknown, y: unknown): unknown {
  if (x == null) return y;
  if (y == null) return x;
  if (typeof x === "object" && typeof (x as { plus?: unknown }).plus === "function") {
    return (x as { plus(o: unknown): unknown }).plus(y);
  }
  return (x as number) + (y as number);
}

function mergeFields(parts: unknown[], pick: (x: unknown, y: unknown) => unknown): unknown {
  if (parts.every((p) => typeof p === "number")) return (parts as number[]).reduce((s, n) => s + n, 0);
  const out: Row = {};
  for (const part of parts) {
    for (const [field, value] of Object.entries((part ?? {}) as Row)) {
      out[field] = field in out ? pick(out[field], value) : value;
    }
  }
  return out;
}

const pickMin = (x: unknown, y: unknown) =>
  x == null ? y : y == null ? x : compareValues(x, y) <= 0 ? x : y;
const pickMax = (x: unknown, y: unknown) =>
  x == null ? y : y == null ? x : compareValues(x, y) >= 0 ? x : y;

/** Merges `count` results from several shards: a number or a per-field object, summed. */
export function mergeCounts(parts: unknown[]): unknown {
  return mergeFields(parts, add);
}

/**
 * Merges `aggregate` results from several shards: `_count` and `_sum` add, `_min` / `_max`
 * compare (nulls ignored, as SQL does). `_avg` cannot be merged from averages and is refused
 * before any query runs (see `assertMergeableAggregate`).
 */
export function mergeAggregates(parts: Row[]): Row {
  const out: Row = {};
  for (const key of new Set(parts.flatMap((p) => Object.keys(p)))) {
    const values = parts.map((p) => p[key]);
    if (key === "_count" || key === "_sum") out[key] = mergeFields(values, add);
    else if (key === "_min") out[key] = mergeFields(values, pickMin);
    else if (key === "_max") out[key] = mergeFields(values, pickMax);
    else throw new UnsupportedShardOperationError(`aggregate ${key} cannot be merged across shards`);
  }
  return out;
}

export function assertMergeableAggregate(args: Row): void {
  if (args._avg) {
    throw new UnsupportedShardOperationError(
      "aggregate _avg over several shards: an average of averages is wrong; ask for _sum and _count and divide",
    );
  }
}
