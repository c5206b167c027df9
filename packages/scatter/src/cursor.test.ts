import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeCursor, encodeCursor, isAfter, keysetSql, keysetWhere, positionOf } from "./cursor.js";
import { ScatterError } from "./errors.js";
import { compareBy, compareNonNull, normalizeOrderBy, type SortKey } from "./sort.js";
import { rowFields, sortKeys } from "./testing/rows.js";

/** Evaluates a keysetWhere filter on a row with SQL semantics (a comparison with NULL is false). */
function matches(filter: Record<string, unknown>, row: Record<string, unknown>): boolean {
  if ("OR" in filter) return (filter.OR as Record<string, unknown>[]).some((f) => matches(f, row));
  if ("AND" in filter) return (filter.AND as Record<string, unknown>[]).every((f) => matches(f, row));
  const [[field, cond]] = Object.entries(filter) as [[string, unknown]];
  const v = row[field] ?? null;
  if (cond === null) return v === null;
  if (typeof cond === "object" && !(cond instanceof Date)) {
    const [[op, operand]] = Object.entries(cond as object) as [[string, unknown]];
    if (op === "not" && operand === null) return v !== null;
    if (v === null) return false;
    const c = compareNonNull(v as never, operand as never);
    if (op === "gt") return c > 0;
    if (op === "lt") return c < 0;
    throw new Error(`unexpected operator ${op}`);
  }
  return v !== null && compareNonNull(v as never, cond as never) === 0;
}

function invalid(cursor: string, orderBy: SortKey[]): ScatterError {
  try {
    decodeCursor(cursor, orderBy);
  } catch (err) {
    expect(err).toBeInstanceOf(ScatterError);
    expect((err as ScatterError).code).toBe("INVALID_CURSOR");
    return err as ScatterError;
  }
  throw new Error(`cursor ${cursor} was accepted`);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

describe("cursors", () => {
  it("round-trip every sort value exactly: bigint, Date, NaN, -0, null, astral strings (property)", () => {
    fc.assert(
      fc.property(rowFields("id-x"), sortKeys, (row, keys) => {
        const order = [...keys, { field: "id" }];
        const cursor = encodeCursor(row, order);
        expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
        const pos = decodeCursor(cursor, order);
        expect(pos.keys.map((k) => k.value)).toEqual(order.map((k) => row[k.field as keyof typeof row]));
        expect(pos).toEqual(positionOf(row, order));
      }),
      { numRuns: 500 },
    );
  });

  it("'strictly after' is the same in isAfter, keysetWhere and the sort order itself (property)", () => {
    fc.assert(
      fc.property(rowFields("id-a"), rowFields("id-b"), fc.boolean(), sortKeys, (a, b, sameId, keys) => {
        const order = [...keys, { field: "id", direction: sameId ? ("desc" as const) : ("asc" as const) }];
        const at = decodeCursor(encodeCursor(a, order), order);
        const expected = compareBy(order)(b, a) > 0;
        expect(isAfter(b, at)).toBe(expected);
        expect(matches(keysetWhere(at), b)).toBe(expected);
        expect(isAfter(a, at)).toBe(false);
        expect(matches(keysetWhere(at), a)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it("turn into a where filter and a SQL condition with nulls and mixed directions expanded", () => {
    const order = normalizeOrderBy([{ score: "desc" }, { name: "asc" }], "id");
    const pos = positionOf({ score: 7, name: null, id: "u1" }, order);
    expect(keysetWhere(pos)).toEqual({
      OR: [
        { score: { lt: 7 } },
        { AND: [{ score: 7 }, { name: null }, { OR: [{ id: { gt: "u1" } }, { id: null }] }] },
      ],
    });
    expect(keysetSql(pos, { firstParam: 3 })).toEqual({
      text: '("score" < $3 OR ("score" = $3 AND "name" IS NULL AND ("id" > $4 OR "id" IS NULL)))',
      values: [7, "u1"],
    });
    const last = positionOf({ score: null, name: "x", id: "u2" }, [{ field: "score", nulls: "last" }]);
    expect(keysetSql(last)).toEqual({ text: "FALSE", values: [] });
    expect(keysetWhere(last)).toEqual({ OR: [] });
  });

  it("leave out null branches for required (NOT NULL) fields", () => {
    const order = normalizeOrderBy([{ createdAt: "desc" }], "id");
    const at = new Date(0);
    const pos = positionOf({ createdAt: at, id: "u1" }, order);
    expect(keysetWhere(pos, { required: ["createdAt", "id"] })).toEqual({
      OR: [{ createdAt: { lt: at } }, { AND: [{ createdAt: at }, { id: { gt: "u1" } }] }],
    });
  });

  it("are validated on decode: garbage, other versions, other orders and tampered values throw INVALID_CURSOR", () => {
    const order = normalizeOrderBy([{ at: "desc" }], "id");
    const good = encodeCursor({ at: new Date(0), id: "a" }, order);
    expect(invalid("", order).message).toMatch(/non-empty/);
    expect(invalid("not a cursor!", order).message).toMatch(/base64url/);
    expect(invalid(good.slice(0, -3), order).message).toMatch(/invalid cursor/);
    expect(invalid(b64([1, 2]), order).message).toMatch(/version/);
    expect(invalid(b64({ v: 2, k: [], p: [] }), order).message).toMatch(/version 2/);
    expect(invalid(good, normalizeOrderBy([{ at: "asc" }], "id")).message).toMatch(
      /made for the order \[at desc first, id asc last\], not \[at asc last, id asc last\]/,
    );
    expect(invalid(good, normalizeOrderBy([{ at: "desc" }], "uuid")).message).toMatch(/made for the order/);
    const k = [
      ["at", "desc", "first"],
      ["id", "asc", "last"],
    ];
    expect(
      invalid(
        b64({
          v: 1,
          k,
          p: [
            ["d", "yesterday"],
            ["s", "a"],
          ],
        }),
        order,
      ).message,
    ).toMatch(/malformed d/);
    expect(
      invalid(
        b64({
          v: 1,
          k,
          p: [
            ["b", "1.5"],
            ["s", "a"],
          ],
        }),
        order,
      ).message,
    ).toMatch(/malformed b/);
    expect(
      invalid(
        b64({
          v: 1,
          k,
          p: [
            ["x", 1],
            ["s", "a"],
          ],
        }),
        order,
      ).message,
    ).toMatch(/malformed x/);
    expect(invalid(b64({ v: 1, k, p: [["s", "a"]] }), order).message).toMatch(/malformed payload/);
    expect(invalid("A".repeat(20_000), order).message).toMatch(/longer than/);
  });

  it("need every sort field in the row and supported values", () => {
    expect(() => encodeCursor({ id: "a" }, [{ field: "at" }, { field: "id" }])).toThrow(
      /no value for sort field "at"/,
    );
    expect(() => encodeCursor({ id: { x: 1 } }, [{ field: "id" }])).toThrow(/holds a object/);
    expect(() => encodeCursor({ id: new Date(Number.NaN) }, [{ field: "id" }])).toThrow(/invalid Date/);
  });
});
