import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareBy, normalizeOrderBy } from "./sort.js";

const sortOf = (values: unknown[], key: Parameters<typeof compareBy>[0] & object) => {
  const field = Array.isArray(key) ? "v" : (key as { field: string }).field;
  return values
    .map((v) => ({ [field]: v }))
    .sort(compareBy(key))
    .map((r) => r[field]);
};

describe("sort semantics (PostgreSQL's)", () => {
  it("puts nulls last for asc and first for desc by default, and anywhere on request", () => {
    expect(sortOf([2, null, 1, undefined], { field: "v" })).toEqual([1, 2, null, undefined]);
    expect(sortOf([2, null, 1], { field: "v", direction: "desc" })).toEqual([null, 2, 1]);
    expect(sortOf([2, null, 1], { field: "v", nulls: "first" })).toEqual([null, 1, 2]);
    expect(sortOf([2, null, 1], { field: "v", direction: "desc", nulls: "last" })).toEqual([2, 1, null]);
  });

  it("compares numbers with bigints, NaN above every number, Dates by time, false before true", () => {
    expect(sortOf([3n, 2.5, -1, 10n ** 30n, Number.NaN, 2n], { field: "v" })).toEqual([
      -1,
      2n,
      2.5,
      3n,
      10n ** 30n,
      Number.NaN,
    ]);
    const d = (day: number) => new Date(Date.UTC(2026, 0, day));
    expect(sortOf([d(3), d(1), d(2)], { field: "v" })).toEqual([d(1), d(2), d(3)]);
    expect(sortOf([true, false, true], { field: "v" })).toEqual([false, true, true]);
  });

  it('orders strings by code point, like PostgreSQL\'s "C" collation on UTF-8 bytes (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), fc.string({ unit: "binary" }), (a, b) => {
        const byBytes = Math.sign(Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")));
        expect(compareBy<{ v: string }>({ field: "v" })({ v: a }, { v: b })).toBe(byBytes);
      }),
      { numRuns: 2000 },
    );
    // U+FFFF sorts before an astral character, although its UTF-16 code unit is larger.
    expect(sortOf(["\u{1F600}", "\uffff", "Z", "a"], { field: "v" })).toEqual([
      "Z",
      "a",
      "\uffff",
      "\u{1F600}",
    ]);
  });

  it("refuses to compare values of different kinds or unsupported types", () => {
    const cmp = compareBy<{ v: unknown }>({ field: "v" });
    expect(() => cmp({ v: "1" }, { v: 1 })).toThrow(/cannot compare a string with a number/);
    expect(() => cmp({ v: {} }, { v: {} })).toThrow(/UNSORTABLE|cannot compare a value of type object/);
  });

  it("accepts sort keys and ORM-style orderBy objects, and appends a tiebreaker", () => {
    expect(
      normalizeOrderBy([{ createdAt: "desc" }, { name: { sort: "asc", nulls: "first" } }], "id"),
    ).toEqual([
      { field: "createdAt", direction: "desc", nulls: "first" },
      { field: "name", direction: "asc", nulls: "first" },
      { field: "id", direction: "asc", nulls: "last" },
    ]);
    expect(normalizeOrderBy({ field: "id", direction: "desc" }, "id")).toEqual([
      { field: "id", direction: "desc", nulls: "first" },
    ]);
    expect(() => normalizeOrderBy([])).toThrow(/empty/);
    expect(() => normalizeOrderBy({ a: "asc", b: "asc" } as never)).toThrow(/exactly one field/);
    expect(() => normalizeOrderBy([{ a: "asc" }, { a: "desc" }])).toThrow(/twice/);
    expect(() => normalizeOrderBy({ a: "up" } as never)).toThrow(/must be 'asc', 'desc'/);
    expect(() => normalizeOrderBy({ field: "a", nulls: "middle" } as never)).toThrow(/nulls of a/);
  });
});
