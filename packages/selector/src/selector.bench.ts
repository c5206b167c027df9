import { murmur3 } from "@shardkit/id";
import { bench, describe } from "vitest";
import { createShardSelector } from "./selector.js";

// Each benchmark iteration makes BATCH calls, so the harness's own per-iteration cost does not
// swamp nanosecond operations: divide the reported mean by BATCH for the time per call.
const BATCH = 1000;
const regions = ["MX", "US", "DE", "BR"];
const rows = Array.from({ length: BATCH }, (_, i) => ({
  tenantId: `tenant-${i}-${(i * 2654435761) % 100000}`,
  region: regions[i % 4]!,
  regulatoryClass: i % 3 === 0 ? "bank" : "fintech",
}));

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const selectorWith = (members: (number | { member: number; weight: number })[]) =>
  createShardSelector({
    routingKey: "tenantId",
    groups: [
      { group: 0, name: "global", members },
      { group: 1, name: "mx-onshore", members },
      { group: 2, name: "eu", members },
    ],
    rules: [
      { name: "mx-bank", when: { region: "MX", regulatoryClass: "bank" }, group: 1 },
      { name: "eu", when: { region: { oneOf: ["DE", "FR", "ES", "IT"] } }, group: 2 },
    ],
    defaultGroup: 0,
  });
const eight = selectorWith(range(8));
const sixtyFour = selectorWith(range(64));
const weighted = selectorWith(range(64).map((member) => ({ member, weight: 1 + (member % 3) })));
const directory = new Map(rows.map((row, i) => [row.tenantId, i % 8]));
let sink = 0;

describe(`select (x${BATCH} per iteration, 3 groups, 2 rules)`, () => {
  bench("Map.get(tenantId) directory lookup [baseline]", () => {
    for (let i = 0; i < BATCH; i++) sink += directory.get(rows[i]!.tenantId)!;
  });
  bench("murmur3(tenantId) % 8, not consistent [baseline]", () => {
    for (let i = 0; i < BATCH; i++) sink += murmur3(rows[i]!.tenantId) % 8;
  });
  bench("select(), 8 members", () => {
    for (let i = 0; i < BATCH; i++) sink += eight.select(rows[i]!).bits;
  });
  bench("select(), 64 members", () => {
    for (let i = 0; i < BATCH; i++) sink += sixtyFour.select(rows[i]!).bits;
  });
  bench("select(), 64 weighted members", () => {
    for (let i = 0; i < BATCH; i++) sink += weighted.select(rows[i]!).bits;
  });
  bench("explain(), 8 members", () => {
    for (let i = 0; i < BATCH; i++) sink += eight.explain(rows[i]!).reason.length;
  });
});

export { sink };
