// Test helpers: random rows with every kind of sort value, random sort orders, and an in-memory
// "shard" that answers a page plan the way a database would.
import fc from "fast-check";
import { isAfter } from "../cursor.js";
import type { PagePlan } from "../paginate.js";
import { compareBy, type SortKey } from "../sort.js";

export interface Row {
  id: string;
  score: number | null;
  name: string | null;
  at: Date | null;
  big: bigint;
  flag: boolean;
}

const SORT_FIELDS = ["score", "name", "at", "big", "flag"] as const;

export const rowFields = (id: string) =>
  fc.record({
    id: fc.constant(id),
    score: fc.option(fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(0.5, -0, Number.NaN)), {
      freq: 4,
    }),
    name: fc.option(fc.constantFrom("a", "b", "B", "é", "\uffff", "\u{1F600}", "ab", ""), { freq: 4 }),
    at: fc.option(
      fc.integer({ min: 0, max: 4 }).map((d) => new Date(Date.UTC(2026, 0, 1 + d))),
      { freq: 4 },
    ),
    big: fc.bigInt({ min: -2n, max: 2n }).map((b) => b * 10n ** 20n),
    flag: fc.boolean(),
  });

/** `n` rows with unique ids. */
export const rows = (maxLength = 40) =>
  fc
    .integer({ min: 0, max: maxLength })
    .chain((n) =>
      fc.tuple(...Array.from({ length: n }, (_, i) => rowFields(`id-${String(i).padStart(3, "0")}`))),
    );

export const sortKeys = fc
  .shuffledSubarray([...SORT_FIELDS], { minLength: 1, maxLength: 3 })
  .chain((fields) =>
    fc.tuple(
      ...fields.map((field) =>
        fc.record(
          {
            field: fc.constant(field),
            direction: fc.constantFrom("asc" as const, "desc" as const),
            nulls: fc.constantFrom("first" as const, "last" as const),
          },
          { requiredKeys: ["field"] },
        ),
      ),
    ),
  )
  .map((keys) => keys as SortKey[]);

/** Spreads rows over `shards` arrays by a list of random shard numbers. */
export function spread<T>(items: readonly T[], where: readonly number[], shards: number): T[][] {
  const out: T[][] = Array.from({ length: shards }, () => []);
  items.forEach((item, i) => {
    out[(where[i % Math.max(1, where.length)] ?? 0) % shards]?.push(item);
  });
  return out;
}

/** Up to `maxRows` rows, a sort order, and the rows spread over 1 to `maxShards` shards. */
export const rowsOnShards = (maxRows: number, maxShards: number) =>
  fc
    .tuple(
      rows(maxRows),
      sortKeys,
      fc.array(fc.nat(), { maxLength: maxRows }),
      fc.integer({ min: 1, max: maxShards }),
    )
    .map(([all, keys, where, k]) => ({ all, keys, k, shards: spread(all, where, k) }));

/** What a database shard returns for a page plan: rows after the cursor, sorted, at most `take`. */
export function fetchFromShard<T extends object>(shard: readonly T[], plan: PagePlan): T[] {
  const after = plan.after;
  return shard
    .filter((r) => after === null || isAfter(r, after))
    .sort(compareBy<T>(plan.orderBy))
    .slice(0, plan.take);
}
