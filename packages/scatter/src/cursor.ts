import { InvalidCursorError, InvalidScatterOptionsError, UnsortableValueError } from "./errors.js";
import {
  compareKey,
  type NormalizedSortKey,
  normalizeOrderBy,
  type OrderByInput,
  type SortValue,
} from "./sort.js";

/** A position in a sort order: the sort-key values of the last row of a page, with each key's direction. */
export interface KeysetPosition {
  readonly keys: readonly KeysetKey[];
}

/** One key of a {@link KeysetPosition}: rows after the position compare greater on the first key that differs. */
export interface KeysetKey extends NormalizedSortKey {
  readonly value: SortValue;
}

const VERSION = 1;
const MAX_CURSOR_LENGTH = 16_384;

type Encoded = null | ["s", string] | ["n", number | string] | ["b", string] | ["d", string] | ["t", boolean];

/** The position of `row` in `orderBy` (a row must carry every sort field; `null` is a value, `undefined` is not). */
export function positionOf(row: object, orderBy: OrderByInput): KeysetPosition {
  const keys = normalizeOrderBy(orderBy);
  return {
    keys: keys.map((k) => {
      const value = (row as Record<string, unknown>)[k.field];
      if (value === undefined)
        throw new InvalidScatterOptionsError(
          `row has no value for sort field ${JSON.stringify(k.field)} (select every sort field)`,
        );
      return { ...k, value: checkValue(value, k.field) };
    }),
  };
}

/**
 * The opaque cursor of the position of `row` in `orderBy`: base64url of a versioned JSON that
 * keeps bigints and Dates exact and records the sort order it was made for.
 */
export function encodeCursor(row: object, orderBy: OrderByInput): string {
  const pos = positionOf(row, orderBy);
  const payload = {
    v: VERSION,
    k: pos.keys.map((k) => [k.field, k.direction, k.nulls]),
    p: pos.keys.map((k) => encodeValue(k.value)),
  };
  return Buffer.from(JSON.stringify(payload), "utf8").toString("base64url");
}

/**
 * Decodes and validates a cursor made by {@link encodeCursor} for the same `orderBy`. Returns the
 * keyset position: the last row's sort-key values with their directions, from which a
 * "strictly after" predicate is built ({@link keysetWhere}, {@link keysetSql}, {@link isAfter}).
 * Anything else (malformed, another version, another sort order) throws `INVALID_CURSOR`:
 * a bad cursor never silently becomes the first page.
 */
export function decodeCursor(cursor: string, orderBy: OrderByInput): KeysetPosition {
  const keys = normalizeOrderBy(orderBy);
  const bad = (why: string): never => {
    throw new InvalidCursorError(`invalid cursor: ${why}`);
  };
  if (typeof cursor !== "string" || cursor.length === 0) bad("not a non-empty string");
  if (cursor.length > MAX_CURSOR_LENGTH) bad(`longer than ${MAX_CURSOR_LENGTH} characters`);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) bad("not base64url");
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    bad("not a shardkit cursor");
  }
  if (typeof payload !== "object" || payload === null) bad("not a shardkit cursor");
  const { v, k, p } = payload as { v?: unknown; k?: unknown; p?: unknown };
  if (v !== VERSION) bad(`version ${String(v)}, expected ${VERSION}`);
  if (!Array.isArray(k) || !Array.isArray(p) || k.length !== p.length) bad("malformed payload");
  const order = (k as unknown[]).map((x) => (Array.isArray(x) ? x.join(" ") : "?")).join(", ");
  const expected = keys.map((x) => `${x.field} ${x.direction} ${x.nulls}`).join(", ");
  if (order !== expected) bad(`made for the order [${order}], not [${expected}]`);
  return {
    keys: keys.map((key, i) => ({ ...key, value: decodeValue((p as unknown[])[i], bad) })),
  };
}

/** True when `row` comes strictly after `position` in the position's order (a row-value comparison). */
export function isAfter(row: object, position: KeysetPosition): boolean {
  for (const k of position.keys) {
    const c = compareKey((row as Record<string, unknown>)[k.field], k.value, k);
    if (c !== 0) return c > 0;
  }
  return false;
}

/** A filter in the nested-object shape ORMs use (`{ OR: [{ AND: [...] }] }`, `{ f: { gt: v } }`, `{ f: null }`). */
export type KeysetFilter = { OR: Record<string, unknown>[] };

/**
 * The predicate "strictly after `position`" as a nested filter object: `{ OR: [...] }` with
 * `{ field: { gt | lt: value } }`, `{ field: value }`, `{ field: null }` and
 * `{ field: { not: null } }` terms (the shape Prisma's `where` accepts). Null ordering and mixed
 * directions are expanded, so it is exact where a SQL row comparison `(a, b) > ($1, $2)` is not.
 * List NOT NULL fields in `required` (Prisma refuses `{ id: null }` on a required field).
 */
export function keysetWhere(
  position: KeysetPosition,
  options: { required?: readonly string[] } = {},
): KeysetFilter {
  const branches: Record<string, unknown>[] = [];
  const prefix: Record<string, unknown>[] = [];
  for (const k of position.keys) {
    // A required (NOT NULL) field has no null rows to include, and ORMs reject `{ field: null }` for it.
    const after = afterTerm(options.required?.includes(k.field) ? { ...k, nulls: "first" } : k);
    if (after !== null) branches.push(prefix.length === 0 ? after : { AND: [...prefix, after] });
    prefix.push({ [k.field]: k.value });
  }
  return { OR: branches };
}

function afterTerm(k: KeysetKey): Record<string, unknown> | null {
  if (k.value === null) return k.nulls === "last" ? null : { [k.field]: { not: null } };
  const beyond = { [k.field]: { [k.direction === "asc" ? "gt" : "lt"]: k.value } };
  return k.nulls === "last" ? { OR: [beyond, { [k.field]: null }] } : beyond;
}

/**
 * The predicate "strictly after `position`" as a parameterised SQL condition, e.g.
 * `("name" > $1 OR "name" IS NULL) OR ("name" = $1 AND "id" > $2)`. Parameters start at
 * `firstParam` (default 1); `column` maps a field to its SQL expression (default: the quoted name).
 */
export function keysetSql(
  position: KeysetPosition,
  options: { firstParam?: number; column?: (field: string) => string } = {},
): { text: string; values: unknown[] } {
  const column = options.column ?? ((f: string) => `"${f.replaceAll('"', '""')}"`);
  const values: unknown[] = [];
  const param = (v: unknown) => {
    values.push(v);
    return `$${(options.firstParam ?? 1) + values.length - 1}`;
  };
  const branches: string[] = [];
  const prefix: string[] = [];
  for (const k of position.keys) {
    const col = column(k.field);
    const p = k.value === null ? "" : param(k.value);
    let after: string | null;
    if (k.value === null) after = k.nulls === "last" ? null : `${col} IS NOT NULL`;
    else {
      const beyond = `${col} ${k.direction === "asc" ? ">" : "<"} ${p}`;
      after = k.nulls === "last" ? `(${beyond} OR ${col} IS NULL)` : beyond;
    }
    if (after !== null) branches.push(prefix.length === 0 ? after : `(${[...prefix, after].join(" AND ")})`);
    prefix.push(k.value === null ? `${col} IS NULL` : `${col} = ${p}`);
  }
  return { text: branches.length === 0 ? "FALSE" : `(${branches.join(" OR ")})`, values };
}

function checkValue(value: unknown, field: string): SortValue {
  if (
    value === null ||
    typeof value === "string" ||
    typeof value === "number" ||
    typeof value === "bigint" ||
    typeof value === "boolean"
  )
    return value;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime()))
      throw new UnsortableValueError(`sort field ${field} holds an invalid Date`);
    return value;
  }
  throw new UnsortableValueError(
    `sort field ${field} holds a ${typeof value}: sort values are number, bigint, string, Date, boolean or null`,
  );
}

function encodeValue(value: SortValue): Encoded {
  if (value === null) return null;
  switch (typeof value) {
    case "string":
      return ["s", value];
    case "number":
      return ["n", Object.is(value, -0) ? "-0" : Number.isFinite(value) ? value : String(value)];
    case "bigint":
      return ["b", value.toString()];
    case "boolean":
      return ["t", value];
    default:
      return ["d", value.toISOString()];
  }
}

function decodeValue(e: unknown, bad: (why: string) => never): SortValue {
  if (e === null) return null;
  if (!Array.isArray(e) || e.length !== 2) return bad("malformed value");
  const [tag, v] = e as [unknown, unknown];
  switch (tag) {
    case "s":
      if (typeof v === "string") return v;
      break;
    case "n":
      if (typeof v === "number") return v;
      if (v === "NaN" || v === "Infinity" || v === "-Infinity" || v === "-0") return Number(v);
      break;
    case "b":
      if (typeof v === "string" && /^-?(0|[1-9][0-9]*)$/.test(v)) return BigInt(v);
      break;
    case "t":
      if (typeof v === "boolean") return v;
      break;
    case "d":
      if (typeof v === "string") {
        const d = new Date(v);
        if (!Number.isNaN(d.getTime()) && d.toISOString() === v) return d;
      }
      break;
  }
  return bad(`malformed ${String(tag)} value`);
}
