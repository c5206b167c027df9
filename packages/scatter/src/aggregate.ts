import { InvalidScatterOptionsError, UnsortableValueError } from "./errors.js";
import { compareBy, compareNonNull, type SortValue } from "./sort.js";

/** Fields to aggregate: `{ amount: true }`. */
export type FieldSelection = Readonly<Record<string, boolean | undefined>>;

/**
 * Which aggregates to compute, keyed like SQL aggregate rows in ORMs (Prisma's `aggregate` and
 * `groupBy` use the same keys): `_count: true` counts rows; `_count: { _all: true, f: true }`
 * counts rows and non-null values of `f`; `_sum`, `_avg`, `_min`, `_max` name fields.
 */
export interface AggregateRequest {
  _count?: true | FieldSelection;
  _sum?: FieldSelection;
  _avg?: FieldSelection;
  _min?: FieldSelection;
  _max?: FieldSelection;
}

/** Aggregate values: what one source returns for a planned request, and what a merge returns. */
export interface AggregateResult {
  _count?: number | bigint | Record<string, number | bigint>;
  _sum?: Record<string, number | bigint | null>;
  _avg?: Record<string, number | null>;
  _min?: Record<string, SortValue>;
  _max?: Record<string, SortValue>;
}

const selected = (s: FieldSelection | undefined): string[] =>
  s ? Object.keys(s).filter((f) => s[f] === true) : [];

/**
 * What every source must compute so the merge is exact: the request with each `_avg` field
 * replaced by its `_sum` and its non-null `_count` (an average is never merged from averages).
 */
export function planAggregate(request: AggregateRequest): AggregateRequest {
  const avg = selected(request._avg);
  const plan: AggregateRequest = {};
  if (request._count !== undefined || avg.length > 0) {
    if (request._count === true && avg.length === 0) plan._count = true;
    else {
      const count: Record<string, true> = {};
      if (request._count === true) count._all = true;
      else for (const f of selected(request._count)) count[f] = true;
      for (const f of avg) count[f] = true;
      plan._count = count;
    }
  }
  const sum = [...selected(request._sum), ...avg];
  if (sum.length > 0) plan._sum = Object.fromEntries(sum.map((f) => [f, true]));
  if (selected(request._min).length > 0) plan._min = { ...request._min };
  if (selected(request._max).length > 0) plan._max = { ...request._max };
  return plan;
}

/**
 * Merges per-source aggregates (each computed for `planAggregate(request)`) into the aggregate of
 * the union: counts and sums add (bigint sums stay bigint), `_avg` = merged sum / merged count,
 * `_min` / `_max` ignore nulls as SQL does (null when every source has none). Returns exactly the
 * keys of `request`. Values must be numbers or bigints (convert numeric text from a driver first).
 */
export function mergeAggregates(
  partials: readonly AggregateResult[],
  request: AggregateRequest,
): AggregateResult {
  const out: AggregateResult = {};
  const avg = selected(request._avg);
  const counts = new Map<string, number | bigint>();
  const needCounts = [...(request._count === true ? ["_all"] : selected(request._count)), ...avg];
  for (const f of needCounts) {
    let total: number | bigint = 0;
    for (const p of partials) total = add(total, countOf(p._count, f), `_count.${f}`);
    counts.set(f, total);
  }
  if (request._count === true) out._count = counts.get("_all") as number | bigint;
  else if (request._count !== undefined)
    out._count = Object.fromEntries(
      selected(request._count).map((f) => [f, counts.get(f) as number | bigint]),
    );
  const sums = new Map<string, number | bigint | null>();
  for (const f of [...selected(request._sum), ...avg]) {
    let total: number | bigint | null = null;
    for (const p of partials) {
      const v = p._sum?.[f];
      if (v === null || v === undefined) continue;
      total = total === null ? check(v, `_sum.${f}`) : add(total, v, `_sum.${f}`);
    }
    sums.set(f, total);
  }
  if (request._sum !== undefined)
    out._sum = Object.fromEntries(selected(request._sum).map((f) => [f, sums.get(f) ?? null]));
  if (request._avg !== undefined)
    out._avg = Object.fromEntries(
      avg.map((f) => {
        const s = sums.get(f);
        const c = counts.get(f);
        return [f, s === null || s === undefined || !c ? null : Number(s) / Number(c)];
      }),
    );
  if (request._min !== undefined) out._min = extremes(partials, "_min", selected(request._min), -1);
  if (request._max !== undefined) out._max = extremes(partials, "_max", selected(request._max), 1);
  return out;
}

/** A group-by row: the group's field values next to its aggregates. */
export type GroupRow = Record<string, unknown> & AggregateResult;

/**
 * Merges per-source `groupBy` results (each computed for `planAggregate(request)` and grouped by
 * `by`): rows of the same group (compared structurally: Dates by time, 1 and 1n alike) are
 * merged with {@link mergeAggregates}. Returns one row per group, ordered by the `by` fields
 * ascending (nulls last). Apply `having`, ordering by aggregates and `skip`/`take` after the merge:
 * a group's totals are only known once every source is in.
 */
export function mergeGroupBy(
  partials: readonly (readonly GroupRow[])[],
  by: readonly string[],
  request: AggregateRequest,
): GroupRow[] {
  if (by.length === 0) throw new InvalidScatterOptionsError("groupBy needs at least one field in `by`");
  const groups = new Map<string, { keys: Record<string, unknown>; parts: GroupRow[] }>();
  for (const rows of partials) {
    for (const row of rows) {
      const id = by.map((f) => groupKey(row[f], f)).join("|");
      let g = groups.get(id);
      if (!g) {
        g = { keys: Object.fromEntries(by.map((f) => [f, row[f] ?? null])), parts: [] };
        groups.set(id, g);
      }
      g.parts.push(row);
    }
  }
  const merged = [...groups.values()].map(
    (g) => ({ ...g.keys, ...mergeAggregates(g.parts, request) }) as GroupRow,
  );
  return merged.sort(compareBy(by.map((field) => ({ field }))));
}

function groupKey(v: unknown, field: string): string {
  if (v === null || v === undefined) return "z";
  switch (typeof v) {
    case "string":
      return `s${JSON.stringify(v)}`;
    case "bigint":
      return `n${v}`;
    case "number":
      return Number.isInteger(v) ? `n${BigInt(v)}` : `n${v}`;
    case "boolean":
      return `t${v}`;
    default:
      if (v instanceof Date) return `d${v.getTime()}`;
      throw new UnsortableValueError(`group field ${field} holds a ${typeof v}`);
  }
}

function countOf(count: AggregateResult["_count"], field: string): number | bigint {
  if (count === undefined) throw new InvalidScatterOptionsError(`a source returned no _count.${field}`);
  const v = typeof count === "object" ? count[field] : field === "_all" ? count : undefined;
  if (v === undefined) throw new InvalidScatterOptionsError(`a source returned no _count.${field}`);
  return v;
}

function check(v: unknown, what: string): number | bigint {
  if (typeof v === "number" || typeof v === "bigint") return v;
  throw new UnsortableValueError(
    `${what} is a ${typeof v}: aggregates merge numbers and bigints (convert numeric text or decimals first)`,
  );
}

function add(a: number | bigint, b: unknown, what: string): number | bigint {
  const x = check(a, what);
  const y = check(b, what);
  if (typeof x === "number" && typeof y === "number") return x + y;
  return toBigInt(x, what) + toBigInt(y, what);
}

function toBigInt(v: number | bigint, what: string): bigint {
  if (typeof v === "bigint") return v;
  if (Number.isSafeInteger(v)) return BigInt(v);
  throw new UnsortableValueError(`${what} mixes bigint with the non-integer number ${v}`);
}

function extremes(
  partials: readonly AggregateResult[],
  kind: "_min" | "_max",
  fields: string[],
  sign: 1 | -1,
): Record<string, SortValue> {
  const out: Record<string, SortValue> = {};
  for (const f of fields) {
    let best: SortValue = null;
    for (const p of partials) {
      const v = p[kind]?.[f];
      if (v === null || v === undefined) continue;
      if (best === null || sign * compareNonNull(v, best) > 0) best = v;
    }
    out[f] = best;
  }
  return out;
}
