import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ScatterError } from "./errors.js";
import { mergeSorted } from "./merge-sorted.js";
import { compareBy } from "./sort.js";
import { rowsOnShards } from "./testing/rows.js";

describe("mergeSorted", () => {
  it("equals sorting the concatenation then slicing, for random sorted shards and offset/limit (property)", () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 70 }),
        fc.option(fc.nat({ max: 70 }), { nil: undefined }),
        rowsOnShards(60, 8),
        (offset, limit, { keys, shards: unsorted }) => {
          const cmp = compareBy(keys);
          const shards = unsorted.map((s) => s.sort(cmp));
          const expected = shards
            .flat()
            .sort(cmp)
            .slice(offset, limit === undefined ? undefined : offset + limit);
          expect(mergeSorted(shards, keys, { offset, limit })).toEqual(expected);
        },
      ),
      { numRuns: 400 },
    );
  });

  it("keeps equal rows in source order and handles empty sources", () => {
    const a = [
      { k: 1, s: "a0" },
      { k: 2, s: "a1" },
    ];
    const b = [
      { k: 1, s: "b0" },
      { k: 2, s: "b1" },
    ];
    expect(mergeSorted([[], a, [], b, []], [{ field: "k" }]).map((r) => r.s)).toEqual([
      "a0",
      "b0",
      "a1",
      "b1",
    ]);
    expect(mergeSorted([], [{ field: "k" }])).toEqual([]);
    expect(mergeSorted([a], [{ field: "k" }], { limit: 0 })).toEqual([]);
  });

  it("reads only what the page needs: a source sorted wrongly far beyond the page is not touched", () => {
    const ok = [{ v: 1 }, { v: 2 }, { v: 9 }, { v: 0 }];
    expect(mergeSorted([ok], [{ field: "v" }], { limit: 2 })).toEqual([{ v: 1 }, { v: 2 }]);
  });

  it("throws UNSORTED_INPUT when a source is not in the requested order (e.g. another collation)", () => {
    // A database with a linguistic collation puts "B" between "a" and "c"; code-point order puts it first.
    const linguistic = [{ name: "a" }, { name: "B" }, { name: "c" }];
    let err: unknown;
    try {
      mergeSorted([linguistic, [{ name: "b" }]], [{ field: "name" }]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ScatterError);
    expect((err as ScatterError).code).toBe("UNSORTED_INPUT");
    expect((err as ScatterError).message).toMatch(/source 0 .*rows 0 and 1.*collation/);
  });

  it("refuses a negative or fractional offset or limit", () => {
    expect(() => mergeSorted([], [{ field: "k" }], { offset: -1 })).toThrow(/offset/);
    expect(() => mergeSorted([], [{ field: "k" }], { limit: 1.5 })).toThrow(/limit/);
  });
});
