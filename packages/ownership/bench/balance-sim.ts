// pnpm exec tsx bench/balance-sim.ts (in packages/ownership): `planBalance` on synthetic fleets, no
// database. Each scenario (src/balance/simulate.ts) is balanced run after run (a run plans with the
// defaults: threshold 0.10, minImprovement 0.02, at most 4 moves; applies its moves; re-measures),
// 20 runs counted, then 20 more on the same load, by three ways through the same planner: measured
// load (what planBalance is for), bytes (what Citus and MongoDB even out by default) and shard
// count. Every way is judged by measured load: max/mean of database load (per capacity). Scenarios
// with an event (a tenant turning hot, a spare database, a drain) first settle by the same way.
//
// Columns: max/mean when the counted runs start and after them; the floor (the hottest shard alone
// over the mean: no placement does better); moves and bytes moved in the counted runs; runs that
// moved; moves that took a shard back to a database it left (with the last 5 runs' moves passed as
// `recentMoves`, and for load, also without any history); moves proposed in the 20 runs after.
//
// BENCH_SEED (default 1) picks the draws; BENCH_SEEDS=n (default 10) runs seeds 1..n for the summary.
import { SCENARIOS, type SimulationResult, type Strategy, simulate } from "../src/balance/simulate.js";

const SEED = Number(process.env.BENCH_SEED ?? 1);
const SEEDS = Number(process.env.BENCH_SEEDS ?? 10);
const GB = 1024 ** 3;

const f2 = (n: number) => n.toFixed(2);
const gb = (n: number) => `${(n / GB).toFixed(0)} GB`;

console.log(`seed ${SEED}\n`);
console.log(
  "| scenario | balanced by | max/mean before | after | floor | moves | bytes moved | runs that moved | moves undone | moves in 20 more runs |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|");
const ways: [Strategy, string, number][] = [
  ["load", "load", 5],
  ["load", "load, no history", 0],
  ["bytes", "bytes", 5],
  ["count", "shard count", 5],
];
const notes: string[] = [];
for (const scenario of SCENARIOS) {
  const results: Record<string, SimulationResult> = {};
  for (const [strategy, label, historyRuns] of ways) {
    const r = simulate(scenario, strategy, { seed: SEED, historyRuns });
    results[label] = r;
    console.log(
      `| ${label === "load" ? scenario.name : ""} | ${label} | ${f2(r.before)} | ${f2(r.after)} | ${f2(r.floor)} | ${r.moves} | ${gb(r.bytesMoved)} | ${r.runsWithMoves} | ${r.undone} | ${r.movesAfter} |`,
    );
  }
  const load = results.load!;
  const bytes = results.bytes!;
  notes.push(
    `${scenario.name}: by load ${f2(load.after)} for ${gb(load.bytesMoved)}; by bytes ${bytes.after <= load.after + 0.005 ? `${f2(bytes.after)} for ${gb(bytes.bytesMoved)}` : `never as even (${f2(bytes.after)} after ${gb(bytes.bytesMoved)})`}`,
  );
}
console.log(`\n${notes.join("\n")}`);

// Over seeds 1..SEEDS, balanced by load: how far from the floor, and whether any move was undone.
let within = 0;
let atFloor = 0;
let undone = 0;
let undoneBare = 0;
let after = 0;
let total = 0;
for (let seed = 1; seed <= SEEDS; seed++) {
  for (const scenario of SCENARIOS) {
    const r = simulate(scenario, "load", { seed });
    const bare = simulate(scenario, "load", { seed, historyRuns: 0 });
    total++;
    if (r.after <= 1.15) within++;
    if (r.after <= Math.max(1.15, r.floor + 0.01)) atFloor++;
    if (!scenario.drift) {
      undone += r.undone;
      undoneBare += bare.undone;
    }
    after += r.movesAfter;
  }
}
console.log(
  `\nseeds 1..${SEEDS}, ${total} runs of the scenarios balanced by load: max/mean <= 1.15 in ${within}; <= 1.15 or within 0.01 of the floor (a hot shard) in ${atFloor}; moves undone on stable load: ${undone} (without history: ${undoneBare}); moves in the 20 runs after: ${after}`,
);
