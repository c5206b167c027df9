// What the shard-key scorecard costs, as a ratio to doing the same count by hand, on the built
// package: `pnpm bench:scorecard` (builds first). The three rows run alternately in one process
// (each round in a rotated order) and are timed by the process's CPU time, so a shared machine's
// load lands on all rows alike instead of on whichever row happens to be running.
import { analyzeShardKey, createShardSelector } from "@shardkit/selector";

const SAMPLES = 1_000_000;
const MEMBERS = 64;
const ROUNDS = Number(process.env.ROUNDS ?? 12);
const WARMUP = 2;

// One million sampled operations over 100,000 keys with a skewed (Zipf-like) popularity; 10% of
// them touch a second key, 1% carry no key.
let seed = 12345;
const random = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 4294967296;
};
const keyAt = (r) => `tenant-${Math.floor(100_000 * r ** 3)}`;
const samples = Array.from({ length: SAMPLES }, (_, i) => ({
  key: i % 100 === 0 ? null : keyAt(random()),
  ...(i % 10 === 1 ? { touches: [keyAt(random())] } : {}),
  op: i % 4 === 0 ? "write" : "read",
  cost: 100 + (i % 900),
}));

const members = Array.from({ length: MEMBERS }, (_, member) => member);
const selector = createShardSelector({
  routingKey: "key",
  groups: [{ group: 0, members }],
  defaultGroup: 0,
});
let sink = 0;

const rows = [
  {
    // The scorecard's core figures by hand: operations and traffic per key, each distinct key
    // placed once by the selector itself, traffic per member (an operation charged to its key's
    // member and to its touched key's member if that is another one, a keyless one to every
    // member). No validation, no read/write split, no top-k, no imbalance or locality summary.
    name: "by hand: per key and per member, select() once per key [baseline]",
    run() {
      const keys = new Map();
      const perMember = new Float64Array(MEMBERS);
      const entry = (key) => {
        let e = keys.get(key);
        if (e === undefined) {
          e = { operations: 0, traffic: 0, member: selector.select({ key }).member };
          keys.set(key, e);
        }
        return e;
      };
      for (const s of samples) {
        const cost = s.cost ?? 1;
        if (s.key == null) {
          for (let m = 0; m < MEMBERS; m++) perMember[m] += cost;
          continue;
        }
        const home = entry(String(s.key));
        home.operations++;
        home.traffic += cost;
        perMember[home.member] += cost;
        if (s.touches) {
          for (const t of s.touches) {
            const other = entry(String(t));
            if (other.member !== home.member) perMember[other.member] += cost; // one touch per sample here
          }
        }
      }
      sink += keys.size + perMember[0];
    },
  },
  {
    // Less than the scorecard has to do (no hash, no members, touched keys ignored): for contrast.
    name: "traffic per key in a Map only: no hash, no members, no touches",
    run() {
      const counts = new Map();
      for (const s of samples) {
        if (s.key == null) continue;
        const key = String(s.key);
        counts.set(key, (counts.get(key) ?? 0) + (s.cost ?? 1));
      }
      sink += counts.size;
    },
  },
  {
    name: `analyzeShardKey(samples, { members: ${MEMBERS} })`,
    run() {
      sink += analyzeShardKey(samples, { members: MEMBERS }).cardinality;
    },
  },
];

const cpuMs = (fn) => {
  const start = process.cpuUsage();
  fn();
  const { user, system } = process.cpuUsage(start);
  return (user + system) / 1000;
};
const times = rows.map(() => []);
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  for (let k = 0; k < rows.length; k++) {
    const i = (round + k) % rows.length;
    const ms = cpuMs(rows[i].run);
    if (round >= WARMUP) times[i].push(ms);
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const [baseline, , scorecard] = times;
const perRound = (xs, ys) => xs.map((x, r) => x / ys[r]);
const ratio = (rs) =>
  `median ${median(rs).toFixed(2)}, ${Math.min(...rs).toFixed(2)} to ${Math.max(...rs).toFixed(2)}`;

console.log(
  `${SAMPLES.toLocaleString("en-US")} samples, ${MEMBERS} members, ${ROUNDS} rounds after ${WARMUP} warm-up rounds; CPU ms per run`,
);
console.log(`${"".padEnd(68)}median     min     max  / baseline (median of rounds)`);
rows.forEach((row, i) => {
  const t = times[i];
  console.log(
    `${row.name.padEnd(68)}${median(t).toFixed(0).padStart(6)}  ${Math.min(...t)
      .toFixed(0)
      .padStart(6)}  ${Math.max(...t)
      .toFixed(0)
      .padStart(6)}  ${median(perRound(t, baseline)).toFixed(2).padStart(6)}`,
  );
});
console.log(`analyzeShardKey / baseline, per round: ${ratio(perRound(scorecard, baseline))}`);
console.log(`analyzeShardKey / Map only, per round: ${ratio(perRound(scorecard, times[1]))}`);
if (sink === 0) console.log("(no work?)");
