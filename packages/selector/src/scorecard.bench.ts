import { bench, describe } from "vitest";
import { analyzeShardKey, type ShardKeySample } from "./scorecard.js";

// One million sampled operations over 100,000 keys with a skewed (Zipf-like) popularity; 10% of
// them touch a second key, 1% carry no key.
const SAMPLES = 1_000_000;
let seed = 12345;
const random = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 4294967296;
};
const keyAt = (r: number) => `tenant-${Math.floor(100_000 * r ** 3)}`;
const samples: ShardKeySample[] = Array.from({ length: SAMPLES }, (_, i) => ({
  key: i % 100 === 0 ? null : keyAt(random()),
  ...(i % 10 === 1 ? { touches: [keyAt(random())] } : {}),
  op: i % 4 === 0 ? "write" : "read",
  cost: 100 + (i % 900),
}));
let sink = 0;

describe(`analyzeShardKey (${SAMPLES.toLocaleString("en-US")} samples per iteration)`, () => {
  bench(
    "count traffic per key in a Map [baseline]",
    () => {
      const counts = new Map<string, number>();
      for (const s of samples) {
        if (s.key == null) continue;
        const key = String(s.key);
        counts.set(key, (counts.get(key) ?? 0) + (s.cost ?? 1));
      }
      sink += counts.size;
    },
    { iterations: 5, time: 0, warmupIterations: 1 },
  );
  bench(
    "analyzeShardKey(samples, { members: 64 })",
    () => {
      sink += analyzeShardKey(samples, { members: 64 }).cardinality;
    },
    { iterations: 5, time: 0, warmupIterations: 1 },
  );
});

export { sink };
