import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type AggregateResult,
  type GroupRow,
  mergeAggregates,
  mergeGroupBy,
  planAggregate,
} from "./aggregate.js";
import { compareNonNull } from "./sort.js";
import { spread } from "./testing/rows.js";

interface Tx {
  currency: string;
  amount: number | null;
  cents: bigint;
  at: Date | null;
}

const tx = fc.record({
  currency: fc.constantFrom("EUR", "USD", "GBP"),
  amount: fc.option(fc.integer({ min: -1000, max: 1000 }), { freq: 4 }),
  cents: fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
  at: fc.option(
    fc.integer({ min: 0, max: 1e12 }).map((t) => new Date(t)),
    { freq: 4 },
  ),
});

/** What a database computes for a planned request over its rows (SQL semantics: aggregates skip nulls). */
function aggregateRows(rows: readonly Tx[]): AggregateResult {
  const nonNull = <K extends keyof Tx>(k: K) =>
    rows.map((r) => r[k]).filter((v) => v !== null) as NonNullable<Tx[K]>[];
  const amounts = nonNull("amount");
  const ats = nonNull("at");
  const pick = (xs: Date[], sign: number) =>
    xs.length === 0 ? null : xs.reduce((a, b) => (sign * compareNonNull(b, a) > 0 ? b : a));
  return {
    _count: { _all: rows.length, amount: amounts.length, cents: rows.length },
    _sum: {
      amount: amounts.length ? amounts.reduce((a, b) => a + b, 0) : null,
      cents: rows.length ? rows.reduce((a, r) => a + r.cents, 0n) : null,
    },
    _min: { at: pick(ats, -1), amount: amounts.length ? Math.min(...amounts) : null },
    _max: { at: pick(ats, 1), amount: amounts.length ? Math.max(...amounts) : null },
  };
}

const request = {
  _count: { _all: true, amount: true },
  _sum: { cents: true, amount: true },
  _avg: { amount: true, cents: true },
  _min: { at: true, amount: true },
  _max: { at: true },
} as const;

function expectedOver(rows: readonly Tx[]): AggregateResult {
  const a = aggregateRows(rows);
  const count = a._count as Record<string, number>;
  const sum = a._sum as Record<string, number | bigint | null>;
  return {
    _count: { _all: count._all as number, amount: count.amount as number },
    _sum: { cents: sum.cents ?? null, amount: sum.amount ?? null },
    _avg: {
      amount: count.amount ? Number(sum.amount) / (count.amount as number) : null,
      cents: count.cents ? Number(sum.cents) / (count.cents as number) : null,
    },
    _min: { at: a._min?.at ?? null, amount: a._min?.amount ?? null },
    _max: { at: a._max?.at ?? null },
  };
}

describe("aggregate merge", () => {
  it("plans avg as sum and count on every shard, never as an average", () => {
    expect(planAggregate({ _avg: { amount: true }, _count: true })).toEqual({
      _count: { _all: true, amount: true },
      _sum: { amount: true },
    });
    expect(planAggregate({ _count: true })).toEqual({ _count: true });
    expect(planAggregate({ _min: { a: true, b: false } })).toEqual({ _min: { a: true, b: false } });
  });

  it("avg is the merged sum over the merged count: 3 rows of 10 and 1 row of 50 average 20, not 30", () => {
    const shardA = aggregateRows(
      [10, 10, 10].map((amount) => ({ currency: "EUR", amount, cents: 0n, at: null })),
    );
    const shardB = aggregateRows([{ currency: "EUR", amount: 50, cents: 0n, at: null }]);
    expect(mergeAggregates([shardA, shardB], { _avg: { amount: true }, _count: true })).toEqual({
      _count: 4,
      _avg: { amount: 20 },
    });
  });

  /** `check(rows, shards)` for any rows spread over 1 to 6 shards (property). */
  const forRowsOnShards = (numRuns: number, check: (rows: Tx[], shards: Tx[][]) => void) =>
    fc.assert(
      fc.property(
        fc.array(tx, { maxLength: 60 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        fc.integer({ min: 1, max: 6 }),
        (rows, where, k) => check(rows, spread(rows, where, k)),
      ),
      { numRuns },
    );

  it("equals the aggregate over the union of the shards, bigint sums staying bigint (property)", () => {
    forRowsOnShards(300, (rows, shards) => {
      const merged = mergeAggregates(shards.map(aggregateRows), request);
      expect(merged).toEqual(expectedOver(rows));
      if (rows.length > 0) expect(typeof merged._sum?.cents).toBe("bigint");
    });
  });

  it("groupBy merges each group across shards and orders groups by key (property)", () => {
    forRowsOnShards(200, (rows, shards) => {
      const perShard = shards.map((shardRows) => {
        const byCurrency = new Map<string, Tx[]>();
        for (const r of shardRows) byCurrency.set(r.currency, [...(byCurrency.get(r.currency) ?? []), r]);
        return [...byCurrency].map(([currency, g]) => ({ currency, ...aggregateRows(g) }) as GroupRow);
      });
      const merged = mergeGroupBy(perShard, ["currency"], request);
      const currencies = [...new Set(rows.map((r) => r.currency))].sort();
      expect(merged).toEqual(
        currencies.map((c) => ({ currency: c, ...expectedOver(rows.filter((r) => r.currency === c)) })),
      );
    });
  });

  it("groups structurally (Dates by time, 1 and 1n alike, null as its own group) and ignores nulls in min/max", () => {
    const t = (ms: number) => new Date(ms);
    const merged = mergeGroupBy(
      [
        [
          { day: t(5), n: 1, _count: 2, _min: { v: null } },
          { day: null, n: 1, _count: 1, _min: { v: "b" } },
        ],
        [
          { day: t(5), n: 1n, _count: 3, _min: { v: "c" } },
          { day: t(1), n: 2, _count: 1, _min: { v: "a" } },
        ],
      ],
      ["day", "n"],
      { _count: true, _min: { v: true } },
    );
    expect(merged).toEqual([
      { day: t(1), n: 2, _count: 1, _min: { v: "a" } },
      { day: t(5), n: 1, _count: 5, _min: { v: "c" } },
      { day: null, n: 1, _count: 1, _min: { v: "b" } },
    ]);
  });

  it("refuses driver text for numbers, missing counts and empty groupBy keys", () => {
    expect(() => mergeAggregates([{ _sum: { a: "12" as never } }], { _sum: { a: true } })).toThrow(
      /convert numeric text/,
    );
    expect(() => mergeAggregates([{}], { _count: true })).toThrow(/no _count._all/);
    expect(() => mergeGroupBy([], [], { _count: true })).toThrow(/at least one field/);
    expect(mergeAggregates([{ _sum: { a: 1 } }, { _sum: { a: 2n } }], { _sum: { a: true } })).toEqual({
      _sum: { a: 3n },
    });
    expect(mergeAggregates([], { _sum: { a: true }, _avg: { a: true }, _max: { a: true } })).toEqual({
      _sum: { a: null },
      _avg: { a: null },
      _max: { a: null },
    });
  });
});
