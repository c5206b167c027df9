import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ScatterError } from "./errors.js";
import { mergePage, planPage } from "./paginate.js";
import { compareBy } from "./sort.js";
import { fetchFromShard, type Row, rowFields, rowsOnShards } from "./testing/rows.js";

describe("planPage", () => {
  it("rewrites a page into offset + limit rows per shard, or limit rows after a cursor", () => {
    const plan = planPage({ orderBy: { createdAt: "desc" }, tiebreaker: "id", offset: 40, limit: 20 });
    expect(plan).toEqual({
      orderBy: [
        { field: "createdAt", direction: "desc", nulls: "first" },
        { field: "id", direction: "asc", nulls: "last" },
      ],
      take: 60,
      after: null,
      offset: 40,
      limit: 20,
    });
    const page = mergePage(plan, [[{ createdAt: new Date(5), id: "x" }]]);
    const next = planPage({
      orderBy: { createdAt: "desc" },
      tiebreaker: "id",
      limit: 20,
      cursor: page.nextCursor,
    });
    expect(page.nextCursor).toBeNull();
    expect(next.after).toBeNull();
    const withCursor = planPage({
      orderBy: { createdAt: "desc" },
      tiebreaker: "id",
      limit: 20,
      cursor: mergePage(planPage({ orderBy: { createdAt: "desc" }, tiebreaker: "id", limit: 1 }), [
        [{ createdAt: new Date(5), id: "x" }],
      ]).nextCursor,
    });
    expect(withCursor.take).toBe(20);
    expect(withCursor.after?.keys.map((k) => k.value)).toEqual([new Date(5), "x"]);
  });

  it("refuses a missing tiebreaker, a tiebreaker that is not last, a bad limit and a foreign cursor", () => {
    const base = { orderBy: { a: "asc" as const }, tiebreaker: "id", limit: 10 };
    expect(() => planPage({ ...base, tiebreaker: "" })).toThrow(/tiebreaker/);
    expect(() => planPage({ ...base, orderBy: [{ id: "asc" }, { a: "asc" }] })).toThrow(/must be the last/);
    expect(() => planPage({ ...base, limit: 0 })).toThrow(/limit/);
    expect(() => planPage({ ...base, offset: -5 })).toThrow(/offset/);
    const cursor = mergePage(planPage({ ...base, limit: 1 }), [
      [{ a: 1, id: "x" }],
      [{ a: 2, id: "y" }],
    ]).nextCursor;
    expect(cursor).not.toBeNull();
    try {
      planPage({ ...base, orderBy: { b: "asc" }, cursor });
      expect.unreachable();
    } catch (err) {
      expect((err as ScatterError).code).toBe("INVALID_CURSOR");
    }
  });

  it("refuses a shard result that ignored the keyset filter", () => {
    const base = { orderBy: { a: "asc" as const }, tiebreaker: "id", limit: 1 };
    const plan = planPage({
      ...base,
      cursor: mergePage(planPage(base), [
        [
          { a: 5, id: "x" },
          { a: 6, id: "y" },
        ],
      ]).nextCursor,
    });
    expect(() => mergePage(plan, [[{ a: 1, id: "w" }]])).toThrow(/not after the cursor/);
  });
});

describe("pagination across shards", () => {
  it("offset pages equal slicing the globally sorted rows (property)", () => {
    fc.assert(
      fc.property(
        rowsOnShards(50, 6),
        fc.nat({ max: 60 }),
        fc.integer({ min: 1, max: 20 }),
        ({ all, keys, shards }, offset, limit) => {
          const plan = planPage({ orderBy: keys, tiebreaker: "id", offset, limit });
          const fetched = shards.map((s) => fetchFromShard(s, plan));
          for (const f of fetched) expect(f.length).toBeLessThanOrEqual(offset + limit);
          const page = mergePage(plan, fetched);
          const expected = [...all].sort(compareBy(plan.orderBy));
          expect(page.rows).toEqual(expected.slice(offset, offset + limit));
          if (expected.length <= offset + limit)
            expect(page.hasMore).toBe(fetched.some((f) => f.length === plan.take));
          else expect(page.hasMore).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("keyset pages visit every row exactly once, in order, while rows are inserted between pages (property)", () => {
    fc.assert(
      fc.property(
        rowsOnShards(40, 5),
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.tuple(fc.nat(), rowFields("new")), { maxLength: 30 }),
        ({ all: initial, keys, k, shards }, limit, inserts) => {
          const order = { orderBy: keys, tiebreaker: "id", limit };
          const seen: Row[] = [];
          const mustSee = new Set(initial.map((r) => r.id));
          let cursor: string | null = null;
          let pages = 0;
          const pending = [...inserts];
          for (;;) {
            const plan = planPage({ ...order, cursor });
            const fetched = shards.map((s) => fetchFromShard(s, plan));
            for (const f of fetched) expect(f.length).toBeLessThanOrEqual(limit);
            const page = mergePage(plan, fetched);
            seen.push(...page.rows);
            cursor = page.nextCursor;
            if (cursor === null) break;
            expect(page.rows).toHaveLength(limit);
            expect(++pages).toBeLessThan(200);
            // Insert some rows anywhere (before or after the cursor) between two pages.
            const last = page.rows[page.rows.length - 1] as Row;
            for (const [j, [n, fields]] of pending.splice(0, 2).entries()) {
              const row = { ...fields, id: `new-${pages}-${j}` };
              shards[n % k]?.push(row);
              if (compareBy<Row>(plan.orderBy)(row, last) > 0) mustSee.add(row.id); // after the cursor: must show up
            }
          }
          const cmp = compareBy<Row>(planPage(order).orderBy);
          for (let i = 1; i < seen.length; i++)
            expect(cmp(seen[i - 1] as Row, seen[i] as Row)).toBeLessThan(0);
          const ids = seen.map((r) => r.id);
          expect(new Set(ids).size).toBe(ids.length);
          for (const id of mustSee) expect(ids).toContain(id);
        },
      ),
      { numRuns: 300 },
    );
  });
});
