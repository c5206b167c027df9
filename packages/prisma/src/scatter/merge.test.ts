import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, PlanTarget, ScatterRead } from "../plan.js";
import { planAggregateRead } from "./aggregate.js";
import { planCount } from "./count.js";
import { planFind } from "./find.js";
import { planGroupBy } from "./group-by.js";
import type { ModelInfo } from "./read.js";

// The merges of scatter reads without a database: each database's answer is written by hand (or
// computed from its own rows the way `argsFor` asks), and the merge must equal what one database
// holding every row would return.

const scalar = (type: string) => ({ kind: "scalar", type });
const Player: ModelInfo = {
  name: "Player",
  fields: {
    id: scalar("String"),
    score: scalar("Int"),
    name: scalar("String"),
    team: scalar("String"),
    label: scalar("String"),
    games: { kind: "object", type: "Game" },
  },
  keys: ["id"],
};

const shards = [0, 1, 2, 3, 4, 5].map((i) => ShardIdentifier.of(i >> 2, i & 3));
/** Ten IDs on various shards, sorted: ID[i] < ID[j] for i < j (the merge's tiebreaker order). */
const ID = Array.from({ length: 10 }, (_, i) => ShardedUUID.generate(shards[i % shards.length]!)).sort();
const target = (args: Obj, database = 0): PlanTarget => ({ database, shards: [], args });
const names = (rows: unknown) => (rows as Obj[]).map((r) => r.name);

describe("findMany / findFirst: what each database is asked", () => {
  it("orderBy gains id as tiebreaker, take becomes skip + take, skip and cursor go", () => {
    const args = { where: { team: "red" }, orderBy: { score: "desc" }, skip: 2, take: 3 };
    const asked = planFind(Player, "findMany", args).argsFor(target(args));
    expect(asked).toEqual({ where: { team: "red" }, orderBy: [{ score: "desc" }, { id: "asc" }], take: 5 });
    expect("skip" in asked).toBe(false);
  });

  it("keys after id are cut, an id already in the order is not appended twice", () => {
    const args = { orderBy: [{ score: "asc" }, { id: "desc" }, { name: "asc" }] };
    expect(planFind(Player, "findMany", args).argsFor(target(args))).toEqual({
      orderBy: [{ score: "asc" }, { id: "desc" }],
    });
  });

  it("no orderBy and no window: each database is asked as called, and the merge is the union", () => {
    const where = { where: { team: "x" } };
    const read = planFind(Player, "findMany", where);
    expect(read.argsFor(target(where))).toEqual(where);
    expect(read.merge([[{ id: ID[2] }], [], [{ id: ID[0] }, { id: ID[1] }]])).toEqual([
      { id: ID[2] },
      { id: ID[0] },
      { id: ID[1] },
    ]);
  });

  it("no orderBy with a window: by id, so the window is the same on every run", () => {
    expect(planFind(Player, "findMany", { skip: 4 }).argsFor(target({ skip: 4 }))).toEqual({
      orderBy: [{ id: "asc" }],
    });
    expect(planFind(Player, "findMany", { take: 3 }).argsFor(target({ take: 3 }))).toEqual({
      orderBy: [{ id: "asc" }],
      take: 3,
    });
  });

  it("each database gets its own target's where (an in list already cut)", () => {
    const args = { where: { id: { in: [ID[0], ID[1]] } }, take: 2 };
    const read = planFind(Player, "findMany", args);
    expect(read.argsFor(target({ ...args, where: { id: { in: [ID[1]] } } }, 1))).toEqual({
      where: { id: { in: [ID[1]] } },
      orderBy: [{ id: "asc" }],
      take: 2,
    });
  });

  it("select gains the sort fields, and the merge strips the ones it added", () => {
    const args = { select: { name: true }, orderBy: { score: "asc" } };
    const read = planFind(Player, "findMany", args);
    expect(read.argsFor(target(args))).toEqual({
      select: { name: true, score: true, id: true },
      orderBy: [{ score: "asc" }, { id: "asc" }],
    });
    const merged = read.merge([
      [
        { name: "a", score: 1, id: ID[0] },
        { name: "c", score: 3, id: ID[2] },
      ],
      [{ name: "b", score: 2, id: ID[1] }],
    ]);
    expect(merged).toEqual([{ name: "a" }, { name: "b" }, { name: "c" }]);
  });

  it("a selected sort field is kept", () => {
    const args = { select: { name: true, score: true }, orderBy: { score: "desc" } };
    const read = planFind(Player, "findMany", args);
    expect(read.argsFor(target(args)).select).toEqual({ name: true, score: true, id: true });
    expect(read.merge([[{ name: "a", score: 1, id: ID[0] }], [{ name: "b", score: 2, id: ID[1] }]])).toEqual([
      { name: "b", score: 2 },
      { name: "a", score: 1 },
    ]);
  });

  it("omit of a sort field is undone for the databases and re-applied by the merge", () => {
    const args = { omit: { score: true, label: true }, orderBy: { score: "asc" } };
    const read = planFind(Player, "findMany", args);
    expect(read.argsFor(target(args)).omit).toEqual({ score: false, label: true });
    expect(read.merge([[{ id: ID[0], name: "a", score: 2 }], [{ id: ID[1], name: "b", score: 1 }]])).toEqual([
      { id: ID[1], name: "b" },
      { id: ID[0], name: "a" },
    ]);
  });

  it("findFirst asks for skip + 1 rows and runs as findMany; findFirstOrThrow says so", () => {
    const read = planFind(Player, "findFirst", { orderBy: { score: "asc" }, skip: 1 });
    expect(read.operation).toBe("findMany");
    expect(read.argsFor(target({ skip: 1 }))).toEqual({
      orderBy: [{ score: "asc" }, { id: "asc" }],
      take: 2,
    });
    expect(read.orThrow).toBeUndefined();
    expect(planFind(Player, "findFirstOrThrow", {}).orThrow).toBe(true);
  });

  it("refuses shapes that do not merge", () => {
    for (const [operation, args] of [
      ["findMany", { distinct: ["team"] }],
      ["findMany", { take: -1 }],
      ["findMany", { skip: 1.5 }],
      ["findFirst", { take: 3 }],
      ["findMany", { orderBy: { games: { _count: "desc" } } }],
      ["findMany", { orderBy: { score: { _count: "desc" } } }],
      ["findMany", { cursor: { name: "a" } }],
      ["findMany", { cursor: { id: "0f8fad5b-d9cb-469f-a165-70867728950e" } }],
    ] as const) {
      expect(() => planFind(Player, operation, args as Obj)).toThrow(UnsupportedShardOperationError);
    }
    const noIdKey = { ...Player, keys: ["team"] };
    expect(() => planFind(noIdKey, "findMany", { take: 5 })).toThrow(
      /needs Player\.id to be a String shard key/,
    );
    expect(planFind(noIdKey, "findMany", {}).merge([[{ id: ID[0] }], [{ id: ID[1] }]])).toHaveLength(2);
  });
});

// Nine rows over three databases, scores with duplicates across databases.
//   order by score desc, id asc: r0(5) r2(5) r7(5) r5(4) r1(3) r4(3) r6(2) r3(1) r8(0)
const row = (i: number, score: number) => ({ id: ID[i]!, score, name: `r${i}` });
const r = [5, 3, 5, 1, 3, 4, 2, 5, 0].map((score, i) => row(i, score));
const at = (...is: number[]) => is.map((i) => ({ ...r[i]! }));

describe("findMany / findFirst: merges", () => {
  it("findMany with skip and take over three sorted lists", () => {
    const args = { orderBy: { score: "desc" }, skip: 2, take: 3 };
    const read = planFind(Player, "findMany", args);
    expect(read.argsFor(target(args)).take).toBe(5);
    // Each database's answer to its args: its own rows by score desc, id asc, at most 5.
    const answers = [at(0, 6, 3), at(7, 1, 4), at(2, 5, 8)];
    expect(names(read.merge(answers))).toEqual(["r7", "r5", "r1"]);
  });

  it("findMany without take returns every row after skip, in order", () => {
    const read = planFind(Player, "findMany", { orderBy: [{ score: "asc" }], skip: 6 });
    const answers = [at(8, 3, 6, 0), at(1, 4, 7), at(5, 2)];
    expect(names(read.merge(answers))).toEqual(["r0", "r2", "r7"]);
  });

  it("findMany asks for more than the window, and the merge cuts it", () => {
    const read = planFind(Player, "findMany", { orderBy: { score: "desc" }, take: 2 });
    expect(names(read.merge([at(0, 6, 3), at(7, 1, 4), at(2, 5, 8)]))).toEqual(["r0", "r2"]);
  });

  it("findFirst: the first row of the merged order, or null", () => {
    const read = planFind(Player, "findFirst", { orderBy: { score: "asc" } });
    expect(read.merge([at(3, 6), at(4), at(8, 5)])).toEqual(r[8]);
    expect(read.merge([[], [], []])).toBeNull();
    expect(read.merge([])).toBeNull();
    const second = planFind(Player, "findFirst", { orderBy: { score: "desc" }, skip: 1 });
    expect(second.merge([at(0, 6), at(7, 1), at(2, 5)])).toEqual(r[2]);
  });

  it("no orderBy: ordered by id across databases", () => {
    const read = planFind(Player, "findMany", { take: 4 });
    expect(names(read.merge([at(1, 5, 8), at(0, 2, 3), at(4)]))).toEqual(["r0", "r1", "r2", "r3"]);
  });
});

// ---- cursor -----------------------------------------------------------------------------------------

/** Prisma's `where` on plain rows: AND, OR, equality, null, gt, lt, in, not null (what keyset filters use). */
function matches(row: Obj, where: Obj | undefined): boolean {
  if (where === undefined) return true;
  return Object.entries(where).every(([key, cond]) => {
    if (key === "AND") return (cond as Obj[]).every((w) => matches(row, w));
    if (key === "OR") return (cond as Obj[]).some((w) => matches(row, w));
    const value = row[key] as number | string | null;
    if (cond === null) return value === null;
    if (typeof cond !== "object") return value === cond;
    return Object.entries(cond as Obj).every(([op, operand]) => {
      switch (op) {
        case "gt":
          return value !== null && value > (operand as number | string);
        case "lt":
          return value !== null && value < (operand as number | string);
        case "in":
          return (operand as unknown[]).includes(value);
        case "not":
          if (operand !== null) throw new Error("only { not: null } is evaluated");
          return value !== null;
        default:
          throw new Error(`operator ${op} is not evaluated here`);
      }
    });
  });
}

/** What one database returns for findMany `args` over its `rows`. */
function answer(rows: readonly Obj[], args: Obj): Obj[] {
  const order = args.orderBy as Record<string, "asc" | "desc">[];
  const sorted = rows
    .filter((x) => matches(x, args.where as Obj | undefined))
    .sort((a, b) => {
      for (const entry of order) {
        const [field, dir] = Object.entries(entry)[0]!;
        const x = a[field] as number | string;
        const y = b[field] as number | string;
        if (x !== y) return (x < y ? -1 : 1) * (dir === "desc" ? -1 : 1);
      }
      return 0;
    });
  const from = (args.skip as number | undefined) ?? 0;
  const rowsOut = sorted.slice(from, args.take === undefined ? undefined : from + (args.take as number));
  return rowsOut.map((x) => ({ ...x }));
}

describe("findMany with a cursor", () => {
  const cursorRow = r[5]!; // score 4
  const args = {
    where: { team: "red" },
    cursor: { id: cursorRow.id },
    orderBy: { score: "asc" },
    skip: 1,
    take: 2,
  };
  const read = planFind(Player, "findMany", args);
  const step = read.prepare!;

  it("reads the cursor row on the shard its ID names", () => {
    expect(step.row?.shard).toBe(ShardedUUID.shardOf(cursorRow.id));
    expect(step.row?.lookup).toEqual({ where: { id: cursorRow.id }, select: { score: true, id: true } });
    expect(step.fields).toEqual(["score"]);
  });

  it("no cursor row: an empty result", () => {
    expect(step.resume(null, new Set())).toBeNull();
  });

  it("resumes with the keyset filter: the cursor row, then rows after its position", () => {
    const next = step.resume({ id: cursorRow.id, score: 4 }, new Set())!;
    const keyset = {
      OR: [
        { id: cursorRow.id },
        { OR: [{ score: { gt: 4 } }] },
        { AND: [{ score: 4 }, { OR: [{ id: { gt: cursorRow.id } }] }] },
      ],
    };
    expect(next.argsFor(target(args))).toEqual({
      where: { AND: [{ team: "red" }, keyset] },
      orderBy: [{ score: "asc" }, { id: "asc" }],
      take: 3,
    });
    // Without a where of its own, the keyset filter is the where.
    expect(next.argsFor(target({})).where).toEqual(keyset);
    expect(next.prepare).toBeUndefined();
  });

  it("keeps null terms for nullable sort fields", () => {
    const next = step.resume({ id: cursorRow.id, score: 4 }, new Set(["score"]))!;
    const where = next.argsFor(target({})).where as Obj;
    expect((where.OR as Obj[])[1]).toEqual({ OR: [{ score: { gt: 4 } }, { score: null }] });
  });

  it("merged pages equal Prisma's cursor semantics on one database", () => {
    const next = step.resume({ id: cursorRow.id, score: 4 }, new Set())!;
    const teamed = r.map((x, i) => ({ ...x, team: i === 7 ? "blue" : "red" }));
    const perDb = [teamed.slice(0, 3), teamed.slice(3, 6), teamed.slice(6)];
    const answers = perDb.map((rows, d) => answer(rows, next.argsFor(target(args, d))));
    // One database: red rows by score asc, id asc, from the cursor row on; skip 1, take 2.
    // r8(0) r3(1) r6(2) r1(3) r4(3) r5(4) r0(5) r2(5) [r7 is blue] -> from r5: r5 r0 r2 -> skip 1: r0 r2
    expect(names(next.merge(answers))).toEqual(["r0", "r2"]);
  });
});

// ---- count --------------------------------------------------------------------------------------------

describe("count", () => {
  it("asks each database for its where only; counts add", () => {
    const args = { where: { team: "red" }, orderBy: { score: "asc" } };
    const read = planCount(Player, args);
    expect(read.argsFor(target(args))).toEqual({ where: { team: "red" } });
    expect(read.merge([3, 4, 1])).toBe(8);
    expect(read.merge([])).toBe(0);
  });

  it("a skip / take window applies to the total", () => {
    const args = { where: { team: "red" }, skip: 2, take: 5 };
    const read = planCount(Player, args);
    expect(read.argsFor(target(args))).toEqual({ where: { team: "red" } });
    // One database holding all 8 rows counts rows 3..7 of them: 5.
    expect(read.merge([3, 4, 1])).toBe(5);
    expect(read.merge([1, 2, 0])).toBe(1);
    expect(read.merge([1, 0, 0])).toBe(0);
    expect(planCount(Player, { skip: 3 }).merge([2, 2, 2])).toBe(3);
    expect(planCount(Player, { take: 4 }).merge([2, 1, 0])).toBe(3);
  });

  it("select counts per field, _all windowed", () => {
    const select = { _all: true, label: true };
    const read = planCount(Player, { select });
    expect(read.argsFor(target({ select }))).toEqual({ select });
    expect(
      read.merge([
        { _all: 2, label: 1 },
        { _all: 3, label: 3 },
      ]),
    ).toEqual({ _all: 5, label: 4 });
    const windowed = planCount(Player, { select: { _all: true }, skip: 1, take: 3 });
    expect(windowed.merge([{ _all: 2 }, { _all: 1 }])).toEqual({ _all: 2 });
    expect(() => planCount(Player, { select, take: 3 })).toThrow(UnsupportedShardOperationError);
    expect(() => planCount(Player, { distinct: ["team"] })).toThrow(UnsupportedShardOperationError);
  });
});

// ---- aggregate ------------------------------------------------------------------------------------

describe("aggregate", () => {
  const args = {
    where: { team: "red" },
    _count: true,
    _avg: { score: true },
    _sum: { score: true },
    _min: { score: true, name: true },
    _max: { score: true },
  };
  const read = planAggregateRead(Player, args);

  it("asks for sums and counts instead of averages", () => {
    expect(read.argsFor(target(args))).toEqual({
      where: { team: "red" },
      _count: { _all: true, score: true },
      _sum: { score: true },
      _min: { score: true, name: true },
      _max: { score: true },
    });
  });

  it("_avg is the merged _sum over the merged _count", () => {
    // db0: scores [1] (names m); db1: scores [3, null, 12, 4] (names b z k q); db2: no rows.
    const merged = read.merge([
      {
        _count: { _all: 1, score: 1 },
        _sum: { score: 1 },
        _min: { score: 1, name: "m" },
        _max: { score: 1 },
      },
      {
        _count: { _all: 4, score: 3 },
        _sum: { score: 19 },
        _min: { score: 3, name: "b" },
        _max: { score: 12 },
      },
      {
        _count: { _all: 0, score: 0 },
        _sum: { score: null },
        _min: { score: null, name: null },
        _max: { score: null },
      },
    ]);
    // One database with scores [1, 3, null, 12, 4]: 5 rows, sum 20 over 4 values (not (1 + 19/3) / 2).
    expect(merged).toEqual({
      _count: 5,
      _avg: { score: 5 },
      _sum: { score: 20 },
      _min: { score: 1, name: "b" },
      _max: { score: 12 },
    });
  });

  it("no rows anywhere: null aggregates, zero count", () => {
    const empty = {
      _count: { _all: 0, score: 0 },
      _sum: { score: null },
      _min: { score: null, name: null },
      _max: { score: null },
    };
    expect(read.merge([empty, empty])).toEqual({
      _count: 0,
      _avg: { score: null },
      _sum: { score: null },
      _min: { score: null, name: null },
      _max: { score: null },
    });
  });

  it("refuses windows and sums of strings", () => {
    expect(() => planAggregateRead(Player, { _count: true, take: 2 })).toThrow(
      UnsupportedShardOperationError,
    );
    expect(() => planAggregateRead(Player, { _sum: { name: true } })).toThrow(/_sum\.name/);
    expect(() => planAggregateRead(Player, { _avg: { nope: true } })).toThrow(/no such field/);
  });
});

// ---- groupBy ------------------------------------------------------------------------------------------

describe("groupBy", () => {
  it("merges a group from several databases, orders by an unselected _avg, then takes", () => {
    const args = {
      by: ["team"],
      where: { label: "x" },
      _count: { _all: true },
      _sum: { score: true },
      orderBy: { _avg: { score: "desc" } },
      take: 2,
    };
    const read = planGroupBy(Player, args);
    expect(read.argsFor(target(args))).toEqual({
      by: ["team"],
      where: { label: "x" },
      _count: { _all: true, score: true },
      _sum: { score: true },
    });
    const merged = read.merge([
      [
        { team: "blue", _count: { _all: 2, score: 2 }, _sum: { score: 10 } },
        { team: "red", _count: { _all: 1, score: 1 }, _sum: { score: 15 } },
      ],
      [
        { team: "green", _count: { _all: 2, score: 2 }, _sum: { score: 12 } },
        { team: "red", _count: { _all: 3, score: 3 }, _sum: { score: 3 } },
      ],
      [{ team: "blue", _count: { _all: 1, score: 1 }, _sum: { score: 11 } }],
    ]);
    // One database: blue 3 rows sum 21 avg 7; green 2 rows sum 12 avg 6; red 4 rows sum 18 avg 4.5.
    // (By _sum it would be blue, red; by an average of averages red (8), blue.)
    expect(merged).toEqual([
      { team: "blue", _count: { _all: 3 }, _sum: { score: 21 } },
      { team: "green", _count: { _all: 2 }, _sum: { score: 12 } },
    ]);
  });

  it("orders by a field with skip, computes _avg, _min and _max across databases", () => {
    const args = {
      by: ["team"],
      _avg: { score: true },
      _max: { name: true },
      orderBy: { team: "desc" },
      skip: 1,
    };
    const read = planGroupBy(Player, args);
    expect(read.argsFor(target(args))).toEqual({
      by: ["team"],
      _count: { score: true },
      _sum: { score: true },
      _max: { name: true },
    });
    const merged = read.merge([
      [
        { team: "blue", _count: { score: 1 }, _sum: { score: 9 }, _max: { name: "k" } },
        { team: "red", _count: { score: 2 }, _sum: { score: 4 }, _max: { name: "a" } },
      ],
      [
        { team: "blue", _count: { score: 2 }, _sum: { score: 3 }, _max: { name: "z" } },
        { team: "green", _count: { score: 0 }, _sum: { score: null }, _max: { name: null } },
      ],
    ]);
    // red, green, blue by team desc; skip 1.
    expect(merged).toEqual([
      { team: "green", _avg: { score: null }, _max: { name: null } },
      { team: "blue", _avg: { score: 4 }, _max: { name: "z" } },
    ]);
  });

  it("_count: true is the number of rows of each group", () => {
    const read = planGroupBy(Player, { by: "team", _count: true, orderBy: { _count: { id: "desc" } } });
    expect(read.argsFor(target({}))).toEqual({ by: ["team"], _count: { _all: true, id: true } });
    expect(
      read.merge([
        [
          { team: "a", _count: { _all: 1, id: 1 } },
          { team: "b", _count: { _all: 1, id: 1 } },
        ],
        [{ team: "b", _count: { _all: 2, id: 2 } }],
      ]),
    ).toEqual([
      { team: "b", _count: 3 },
      { team: "a", _count: 1 },
    ]);
  });

  it("refuses having, unsortable groups and orderBy outside by", () => {
    expect(() => planGroupBy(Player, { by: ["team"], having: { score: { _sum: { gt: 1 } } } })).toThrow(
      /having/,
    );
    expect(() => planGroupBy(Player, { by: ["games"] })).toThrow(UnsupportedShardOperationError);
    expect(() => planGroupBy(Player, { by: ["team"], orderBy: { score: "asc" } })).toThrow(/one of by/);
    // An empty having is no having.
    expect(() => planGroupBy(Player, { by: ["team"], having: {} })).not.toThrow();
  });
});

// ---- property: the merge equals one database holding every row ----------------------------------

describe("property: merged findMany / findFirst equal the reference over every row", () => {
  it("random rows over 1-4 databases, scores with duplicates, skip/take, optional cursor", () => {
    const shardList = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ShardIdentifier.of(i >> 2, i & 3));
    fc.assert(
      fc.property(
        fc.array(fc.record({ score: fc.integer({ min: 0, max: 4 }), shard: fc.nat(7), db: fc.nat(3) }), {
          maxLength: 30,
        }),
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom("asc" as const, "desc" as const),
        fc.nat(6),
        fc.option(fc.nat(8), { nil: undefined }),
        fc.constantFrom("findMany", "findFirst"),
        fc.option(fc.nat(29), { nil: undefined }),
        (specs, databases, direction, skip, take, operation, cursorAt) => {
          const rows = specs.map((s) => ({
            id: ShardedUUID.generate(shardList[s.shard]!),
            score: s.score,
            db: s.db % databases,
          }));
          const cursor =
            cursorAt === undefined || rows.length === 0 ? undefined : rows[cursorAt % rows.length]!;
          const args: Obj = {
            orderBy: { score: direction },
            skip,
            ...(operation === "findMany" && take !== undefined ? { take } : {}),
            ...(cursor ? { cursor: { id: cursor.id } } : {}),
          };
          let read: ScatterRead = planFind(Player, operation, args);
          if (cursor) {
            expect(read.prepare!.row!.shard).toBe(ShardedUUID.shardOf(cursor.id));
            read = read.prepare!.resume({ id: cursor.id, score: cursor.score }, new Set())!;
          }

          // What each database is asked, and its answer over its own rows.
          const answers = Array.from({ length: databases }, (_, d) => {
            const asked = read.argsFor(target(args, d));
            expect(asked.orderBy).toEqual([{ score: direction }, { id: "asc" }]);
            expect(asked.skip).toBeUndefined();
            expect(asked.cursor).toBeUndefined();
            const window = operation === "findFirst" ? 1 : take;
            expect(asked.take).toBe(window === undefined ? undefined : skip + window);
            const own = rows.filter((x) => x.db === d).reverse();
            return answer(own, asked);
          });

          // One database holding every row: sort, start at the cursor row, skip, take.
          const sign = direction === "asc" ? 1 : -1;
          const all = [...rows].sort(
            (a, b) => sign * (a.score - b.score) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
          );
          const from = cursor ? all.findIndex((x) => x.id === cursor.id) : 0;
          const window = all.slice(from + skip);
          const expected =
            operation === "findFirst"
              ? (window[0] ?? null)
              : take === undefined
                ? window
                : window.slice(0, take);
          expect(read.merge(answers)).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
