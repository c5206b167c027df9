import { compareBy, isAfter, isShardkitError, mergePage, planPage, scatter } from "@shardkit/scatter";

// Three in-memory "shards" with different latencies; "ap" is down for now.
const shards = [
  {
    name: "eu",
    latencyMs: 5,
    up: true,
    orders: [120, 75, 300, 42].map((t, i) => ({ id: `eu-${i}`, total: t })),
  },
  { name: "us", latencyMs: 30, up: true, orders: [99, 300, 15].map((t, i) => ({ id: `us-${i}`, total: t })) },
  { name: "ap", latencyMs: 10, up: false, orders: [250, 75].map((t, i) => ({ id: `ap-${i}`, total: t })) },
];

// What a database does for a page plan: rows after the cursor, in order, at most plan.take of them.
function fetchPage(shard, plan, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      if (!shard.up) return reject(new Error("connect ECONNREFUSED 127.0.0.1:5433"));
      const rows = shard.orders.filter((o) => plan.after === null || isAfter(o, plan.after));
      resolve(rows.sort(compareBy(plan.orderBy)).slice(0, plan.take));
    }, shard.latencyMs);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

const request = { orderBy: [{ total: "desc" }], tiebreaker: "id", limit: 4 };
const options = { key: (s) => s.name, concurrency: 8, deadlineMs: 1000 };

// 'partial': the shards that answered, and exactly which one did not.
const plan = planPage(request);
const partial = await scatter(shards, (s, signal) => fetchPage(s, plan, signal), {
  ...options,
  policy: "partial",
});
const missing = partial.missing.map((m) => `${m.key} (${m.reason}: ${m.error.message})`);
console.log(`complete: ${partial.complete}, missing: ${missing.join(", ")}`);
console.log(
  `partial page: ${mergePage(plan, partial.values)
    .rows.map((o) => `${o.id}=${o.total}`)
    .join(" ")}`,
);

// 'fail' (the default): the error names every missing shard.
try {
  await scatter(shards, (s, signal) => fetchPage(s, plan, signal), options);
} catch (err) {
  if (isShardkitError(err, "TARGETS_FAILED")) console.log(`${err.name} ${err.code}: ${err.message}`);
}

// "ap" is back: page through all three shards with an opaque cursor.
shards[2].up = true;
let cursor = null;
do {
  const plan = planPage({ ...request, cursor });
  const result = await scatter(shards, (s, signal) => fetchPage(s, plan, signal), options);
  const page = mergePage(plan, result.values);
  const fetched = result.outcomes.map((o) => `${o.key}:${o.rows}`).join(" ");
  console.log(`page: ${page.rows.map((o) => `${o.id}=${o.total}`).join(" ")}  (fetched ${fetched})`);
  cursor = page.nextCursor;
  if (cursor) console.log(`next cursor: ${cursor}`);
} while (cursor);
