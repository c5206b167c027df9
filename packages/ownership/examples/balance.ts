import { planBalance } from "@shardkit/ownership";

// Measured load of each logical shard (database time per second, bytes), where each lives, and a
// residency rule: group 1 stays on databases labelled region=eu.
const load = {
  "0/0": { load: 0.9, bytes: 40e9 },
  "0/1": { load: 0.3, bytes: 2e9 },
  "0/2": { load: 0.3, bytes: 30e9 },
  "1/0": { load: 0.4, bytes: 5e9 },
  "1/1": { load: 0.1, bytes: 1e9 },
  "0/3": { load: 0.2, bytes: 8e9 },
};
const fleet = {
  databases: [
    { name: "eu-1", labels: { region: "eu" } },
    { name: "eu-2", labels: { region: "eu" } },
    { name: "us-1", labels: { region: "us" } },
  ],
  shards: [
    { shard: "0/0", database: "eu-1" },
    { shard: "0/1", database: "eu-1" },
    { shard: "0/2", database: "eu-1" },
    { shard: "1/0", database: "eu-1" },
    { shard: "1/1", database: "eu-2" },
    { shard: "0/3", database: "us-1" },
  ],
};
const plan = planBalance(load, fleet, {
  allows: (shard, db) =>
    shard.group === 1 && db.labels.region !== "eu" ? "group 1 stays in region eu" : undefined,
});
for (const m of plan.moves) console.log(`move ${m.shard} ${m.from} -> ${m.to}: ${m.reason}`);
for (const h of plan.hot) console.log(`hot ${h.shard} on ${h.database}: ${h.reason}`);
console.log(`${plan.stoppedBy}: ${plan.reason}`);
