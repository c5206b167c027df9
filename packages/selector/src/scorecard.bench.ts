import { bench, describe } from "vitest";
import { murmur3, prepareCandidates, rendezvous } from "./hash.js";
import { analyzeShardKey, type ShardKeySample } from "./scorecard.js";

// One million sampled operations over 100,000 keys with a skewed (Zipf-like) popularity; 10% of
// them touch a second key, 1% carry no key.
const SAMPLES = 1_000_000;
const MEMBERS = 64;
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
// The selector's own hash (what `select()` runs), prepared once: equal weights, members 0..63.
const candidates = prepareCandidates(Array.from({ length: MEMBERS }, (_, member) => ({ member, weight: 1 })));
let sink = 0;
// Timed by the process's CPU time, not the wall clock: on a shared machine, time given to other
// processes would otherwise land on whichever row happens to be running.
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
const options = { iterations: 10, time: 0, warmupIterations: 2, now: cpuMs };

describe(`analyzeShardKey (${SAMPLES.toLocaleString("en-US")} samples per iteration, ${MEMBERS} members)`, () => {
  // What the scorecard's core figures would take by hand: operations and traffic per key, each
  // distinct key hashed to its member once by the selector's hash, traffic per member (an
  // operation charged to its key's member and to its touched key's member if that is another one;
  // a keyless one to every member). No validation, no read/write split, no top-k, no summary.
  bench(
    "by hand: traffic per key and per member, same hash [baseline]",
    () => {
      const keys = new Map<string, { operations: number; traffic: number; member: number }>();
      const perMember = new Float64Array(MEMBERS);
      const entry = (key: string) => {
        let e = keys.get(key);
        if (e === undefined) {
          e = { operations: 0, traffic: 0, member: rendezvous(candidates, murmur3(key)) };
          keys.set(key, e);
        }
        return e;
      };
      for (const s of samples) {
        const cost = s.cost ?? 1;
        if (s.key == null) {
          for (let m = 0; m < MEMBERS; m++) perMember[m]! += cost;
          continue;
        }
        const home = entry(String(s.key));
        home.operations++;
        home.traffic += cost;
        perMember[home.member]! += cost;
        if (s.touches) {
          for (const t of s.touches) {
            const other = entry(String(t));
            if (other.member !== home.member) perMember[other.member]! += cost; // one touch per sample here
          }
        }
      }
      sink += keys.size + perMember[0]!;
    },
    options,
  );
  // Less than the scorecard's work: no member, no touched keys. Shown for contrast only.
  bench(
    "traffic per key in a Map only: no hash, no members, no touches",
    () => {
      const counts = new Map<string, number>();
      for (const s of samples) {
        if (s.key == null) continue;
        const key = String(s.key);
        counts.set(key, (counts.get(key) ?? 0) + (s.cost ?? 1));
      }
      sink += counts.size;
    },
    options,
  );
  bench(
    `analyzeShardKey(samples, { members: ${MEMBERS} })`,
    () => {
      sink += analyzeShardKey(samples, { members: MEMBERS }).cardinality;
    },
    options,
  );
});

export { sink };
