import { bench, describe } from "vitest";
import { mergeSorted } from "./merge-sorted.js";
import { scatter } from "./scatter.js";
import { compareBy, type SortKey } from "./sort.js";

// 1) Fan-out latency: 8 shards, each answering after L ms (timers stand in for database latency).
// Baseline: one lone call of L ms (the best any fan-out can do); a sequential fan-out is 8 L.
const SHARDS = Array.from({ length: 8 }, (_, i) => i);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => resolve(ms), ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });

for (const L of [10, 50]) {
  describe(`8 shards, latency L = ${L} ms each`, () => {
    const opts = { iterations: L === 50 ? 12 : 30, time: 0, warmupIterations: 2 };
    bench(`one call of L [baseline]`, () => sleep(L).then(() => undefined), opts);
    bench(
      "scatter(8 targets)",
      async () => {
        await scatter(SHARDS, (_, signal) => sleep(L, signal), { deadlineMs: 20 * L });
      },
      opts,
    );
    bench(
      "sequential fan-out (for ... await)",
      async () => {
        for (const _ of SHARDS) await sleep(L);
      },
      { ...opts, iterations: 5 },
    );
  });
}

// 2) Ordered merge: top 100 of 8 shards x 100,000 rows, each shard sorted by (score desc, id asc).
const ROWS = 100_000;
const order: SortKey[] = [{ field: "score", direction: "desc" }, { field: "id" }];
const cmp = compareBy<{ id: string; score: number }>(order);
let seed = 7;
const rand = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed;
};
const shards = SHARDS.map((s) =>
  Array.from({ length: ROWS }, (_, i) => ({
    id: `${s}-${String(i).padStart(6, "0")}`,
    score: rand() % 1_000_000,
  })).sort(cmp),
);
// What the pagination rewrite makes each shard fetch for the first page: offset + limit = 100 rows.
const firstPages = shards.map((rows) => rows.slice(0, 100));
const BATCH = 100;
let sink = 0;

describe("top 100 of 8 x 100k sorted rows", () => {
  bench(
    "fetch everything, concat + sort + slice [baseline]",
    () => {
      sink += shards.flat().sort(cmp).slice(0, 100).length;
    },
    { iterations: 5, time: 0 },
  );
  bench(`mergeSorted(8 x 100k, limit 100) (x${BATCH} per iteration)`, () => {
    for (let i = 0; i < BATCH; i++) sink += mergeSorted(shards, order, { limit: 100 }).length;
  });
  bench(`mergeSorted(8 x 100 fetched rows, limit 100) (x${BATCH} per iteration)`, () => {
    for (let i = 0; i < BATCH; i++) sink += mergeSorted(firstPages, order, { limit: 100 }).length;
  });
});

describe("full merge of 8 x 100k sorted rows (throughput)", () => {
  bench(
    "concat + sort [baseline]",
    () => {
      sink += shards.flat().sort(cmp).length;
    },
    {
      iterations: 5,
      time: 0,
    },
  );
  bench(
    "mergeSorted(8 x 100k)",
    () => {
      sink += mergeSorted(shards, order).length;
    },
    {
      iterations: 5,
      time: 0,
    },
  );
  bench("mergeSorted(8 x 100k, offset 10,000, limit 100)", () => {
    sink += mergeSorted(shards, order, { offset: 10_000, limit: 100 }).length;
  });
});

export { sink };
