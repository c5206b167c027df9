import { InvalidScatterOptionsError, UnsortableValueError } from "./errors.js";

/** Values a sort key, a cursor or min/max may hold. `undefined` is read as null. */
export type SortValue = number | bigint | string | Date | boolean | null;

/** One sort key. `nulls` defaults to PostgreSQL's default: `'last'` for `'asc'`, `'first'` for `'desc'`. */
export interface SortKey {
  readonly field: string;
  readonly direction?: "asc" | "desc";
  readonly nulls?: "first" | "last";
}

/** A sort key with every choice made explicit (what {@link normalizeOrderBy} returns). */
export interface NormalizedSortKey {
  readonly field: string;
  readonly direction: "asc" | "desc";
  readonly nulls: "first" | "last";
}

/**
 * A sort order: a list of {@link SortKey}s, or the `orderBy` shape of an ORM (`{ field: 'asc' }`,
 * `{ field: { sort: 'desc', nulls: 'last' } }`, or a list of those, one field per object).
 */
export type OrderByInput = SortKey | OrderByObject | readonly (SortKey | OrderByObject)[];

/** `{ field: 'asc' }` or `{ field: { sort: 'desc', nulls: 'last' } }`: one defined field per object. */
export type OrderByObject = Readonly<
  Record<string, "asc" | "desc" | { sort: "asc" | "desc"; nulls?: "first" | "last" } | undefined>
>;

/**
 * Makes a sort order explicit: a list of keys with direction and null ordering. With
 * `tiebreaker`, appends `{ field: tiebreaker, direction: 'asc' }` unless the order already sorts
 * by that field (a unique field makes the order total, which keyset cursors need).
 */
export function normalizeOrderBy(orderBy: OrderByInput, tiebreaker?: string): NormalizedSortKey[] {
  const items = Array.isArray(orderBy) ? orderBy : [orderBy];
  const keys: NormalizedSortKey[] = [];
  for (const item of items as unknown[]) {
    if (typeof item !== "object" || item === null)
      throw new InvalidScatterOptionsError(`orderBy entries must be objects, got ${String(item)}`);
    if (typeof (item as SortKey).field === "string") {
      const k = item as SortKey;
      keys.push(key(k.field, k.direction ?? "asc", k.nulls));
      continue;
    }
    const entries = Object.entries(item as Record<string, unknown>).filter(([, v]) => v !== undefined);
    if (entries.length !== 1)
      throw new InvalidScatterOptionsError(
        `each orderBy object must name exactly one field (got ${entries.length}); use a list for several`,
      );
    const [field, spec] = entries[0] as [string, unknown];
    if (spec === "asc" || spec === "desc") keys.push(key(field, spec, undefined));
    else if (typeof spec === "object" && spec !== null && "sort" in spec) {
      const s = spec as { sort: unknown; nulls?: unknown };
      keys.push(key(field, s.sort, s.nulls));
    } else
      throw new InvalidScatterOptionsError(
        `orderBy.${field} must be 'asc', 'desc' or { sort, nulls } (nested relations are not supported)`,
      );
  }
  if (tiebreaker !== undefined && !keys.some((k) => k.field === tiebreaker))
    keys.push(key(tiebreaker, "asc"));
  if (keys.length === 0) throw new InvalidScatterOptionsError("orderBy is empty");
  const fields = new Set<string>();
  for (const k of keys) {
    if (fields.has(k.field)) throw new InvalidScatterOptionsError(`orderBy names ${k.field} twice`);
    fields.add(k.field);
  }
  return keys;
}

function key(field: string, direction: unknown, nulls?: unknown): NormalizedSortKey {
  if (field === "") throw new InvalidScatterOptionsError("a sort field name is empty");
  if (direction !== "asc" && direction !== "desc")
    throw new InvalidScatterOptionsError(`direction of ${field} must be 'asc' or 'desc'`);
  if (nulls !== undefined && nulls !== "first" && nulls !== "last")
    throw new InvalidScatterOptionsError(`nulls of ${field} must be 'first' or 'last'`);
  return { field, direction, nulls: nulls ?? (direction === "asc" ? "last" : "first") };
}

function kindOf(v: unknown): number {
  switch (typeof v) {
    case "number":
    case "bigint":
      return 1;
    case "string":
      return 2;
    case "boolean":
      return 3;
    default:
      if (v instanceof Date) return 4;
      throw new UnsortableValueError(
        `cannot compare a value of type ${v === null ? "null" : typeof v}${typeof v === "object" ? ` (${(v as object).constructor?.name ?? "Object"})` : ""}: sort values are number, bigint, string, Date, boolean or null`,
      );
  }
}

/**
 * Compares two non-null sort values in ascending order, as PostgreSQL does for one column type:
 * numbers and bigints numerically (NaN after every number), strings by Unicode code point (the
 * order of PostgreSQL's "C" collation on UTF-8), Dates by time, false before true.
 * Values of different kinds (a string and a number) throw `UNSORTABLE_VALUE`.
 */
export function compareNonNull(a: NonNullable<SortValue>, b: NonNullable<SortValue>): number {
  if (typeof a === "string" && typeof b === "string") return compareStrings(a, b);
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka !== kb)
    throw new UnsortableValueError(`cannot compare a ${typeof a} with a ${typeof b} in one sort key`);
  if (ka === 4) {
    const x = (a as Date).getTime();
    const y = (b as Date).getTime();
    return compareNumbers(x, y);
  }
  if (ka === 1) return compareNumbers(a as number | bigint, b as number | bigint);
  if (ka === 3) return a === b ? 0 : a ? 1 : -1;
  return compareStrings(a as string, b as string);
}

function compareNumbers(a: number | bigint, b: number | bigint): number {
  if (a < b) return -1;
  if (a > b) return 1;
  // biome-ignore lint/suspicious/noDoubleEquals: a bigint and a number of equal value are equal
  if (a == b) return 0;
  // one of them is NaN: PostgreSQL sorts NaN above every number and equal to itself
  const an = typeof a === "number" && Number.isNaN(a);
  const bn = typeof b === "number" && Number.isNaN(b);
  return an === bn ? 0 : an ? 1 : -1;
}

/** Code point order: like `<` on UTF-16 code units, except that astral characters sort after U+E000..U+FFFF. */
function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x < 0xe000 ? x + 0x2000 : x - 0x800;
        y = y < 0xe000 ? y + 0x2000 : y - 0x800;
      }
      return x < y ? -1 : 1;
    }
  }
  return a.length < b.length ? -1 : 1;
}

/** Compares one sort key's values with its direction and null ordering (undefined counts as null). */
export function compareKey(a: unknown, b: unknown, key: NormalizedSortKey): number {
  const an = a === null || a === undefined;
  const bn = b === null || b === undefined;
  if (an || bn) {
    if (an && bn) return 0;
    return an === (key.nulls === "first") ? -1 : 1;
  }
  const c = compareNonNull(a as NonNullable<SortValue>, b as NonNullable<SortValue>);
  return key.direction === "asc" ? c : -c;
}

/** A comparator of rows (objects) by a sort order, for `Array.prototype.sort` and for merges. */
export function compareBy<Row = Record<string, unknown>>(orderBy: OrderByInput): (a: Row, b: Row) => number {
  const keys = normalizeOrderBy(orderBy);
  if (keys.length === 1) {
    const k = keys[0] as NormalizedSortKey;
    const f = k.field;
    return (a, b) => compareKey((a as Record<string, unknown>)[f], (b as Record<string, unknown>)[f], k);
  }
  return (a, b) => {
    for (const k of keys) {
      const c = compareKey(
        (a as Record<string, unknown>)[k.field],
        (b as Record<string, unknown>)[k.field],
        k,
      );
      if (c !== 0) return c;
    }
    return 0;
  };
}
