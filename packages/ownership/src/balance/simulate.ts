// A simulator for `planBalance` (no database): synthetic fleets of logical shards with load and
// bytes, balanced run after run (each run plans, applies its moves, re-measures), by measured load
// and, for comparison, by bytes (what Citus and MongoDB even out by default) and by shard count,
// through the same planner given bytes or 1 as each shard's load. Deterministic: a seeded PRNG.
// Internal: the bench (bench/balance-sim.ts) and the tests use it.
import { ShardIdentifier } from "@shardkit/id";
import type { PlacementCheck } from "@shardkit/prisma";
import { planBalance } from "./plan.js";
import type { BalanceDatabase, BalanceOptions, ShardLoads } from "./types.js";

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal draw (Box-Muller). */
function normal(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

export interface SimShard {
  shard: string;
  load: number;
  bytes: number;
}

/** A fleet: databases, shards with their measured figures, and where each shard is. */
export interface Fleet {
  databases: BalanceDatabase[];
  shards: SimShard[];
  at: Map<string, string>;
}

/** What is balanced: measured load (planBalance as meant), bytes (size-based), or shard count. */
export type Strategy = "load" | "bytes" | "count";

export interface Scenario {
  name: string;
  /** The fleet before the runs counted (its seed's draws). */
  fleet(random: () => number): Fleet;
  /** Applied once the fleet has settled (balanced by the same strategy), before the counted runs. */
  event?(fleet: Fleet, random: () => number): void;
  /** Applied before each counted run (load that shifts between runs). */
  drift?(fleet: Fleet, random: () => number): void;
  allows?: PlacementCheck;
}

export interface SimulationResult {
  scenario: string;
  strategy: Strategy;
  /** max/mean database load (measured load, per capacity) when the counted runs start, and after them. */
  before: number;
  after: number;
  /** The best any placement could do: the hottest shard alone over the mean (or 1). */
  floor: number;
  moves: number;
  bytesMoved: number;
  /** Runs (of those counted) that proposed a move. */
  runsWithMoves: number;
  /** Moves that took a shard back to a database it left earlier in the counted runs (or the 20 after them). */
  undone: number;
  /** Moves proposed by 20 more runs once the counted ones are over, load unchanged. */
  movesAfter: number;
  /** Shards reported hot at the last run (strategy "load"). */
  hot: number;
  /** Shards still on draining databases at the end. */
  leftOnDraining: number;
}

const GB = 1024 ** 3;

/** `n` shards (0/0, 0/1, ... 0/63, 1/0, ...), Zipf-skewed load (exponent `s`) in random order, bytes growing with load. */
export function zipfShards(random: () => number, n: number, s = 1): SimShard[] {
  const ranks = Array.from({ length: n }, (_, i) => i + 1);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
  }
  return ranks.map((rank, i) => {
    const load = 1000 / rank ** s;
    // Larger tenants hold more data, loosely: bytes ~ sqrt(load), spread by a lognormal factor.
    const bytes = Math.round(2 * GB * Math.sqrt(load / 10) * Math.exp(0.8 * normal(random)));
    return { shard: ShardIdentifier.fromBits(i).key, load, bytes };
  });
}

/** Databases named a, b, c, ... and shards placed round-robin (the fleet evened by shard count). */
export function roundRobin(names: string[], shards: SimShard[]): Fleet {
  return {
    databases: names.map((name) => ({ name })),
    shards,
    at: new Map(shards.map((s, i) => [s.shard, names[i % names.length]!])),
  };
}

const letters = (n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + i));

/** The scenarios of the bench: (a) to (e), and Zipf with a residency rule. */
export const SCENARIOS: Scenario[] = [
  {
    name: "(a) Zipf tenants, 4 databases, 128 shards",
    fleet: (r) => roundRobin(letters(4), zipfShards(r, 128)),
  },
  {
    name: "(a) Zipf tenants, 8 databases, 256 shards",
    fleet: (r) => roundRobin(letters(8), zipfShards(r, 256)),
  },
  {
    name: "(b) a tenant turns hot (1.3x a database's mean), 6 databases, 128 shards",
    fleet: (r) => roundRobin(letters(6), zipfShards(r, 128, 0.8)),
    event: (f) => {
      const total = f.shards.reduce((t, s) => t + s.load, 0);
      const median = [...f.shards].sort((a, b) => a.load - b.load)[64]!;
      median.load = (1.3 * (total - median.load)) / (6 - 1.3);
    },
  },
  {
    name: "(c) a spare database added, 4 + 1, 128 shards",
    fleet: (r) => roundRobin(letters(4), zipfShards(r, 128, 0.8)),
    event: (f) => {
      f.databases.push({ name: "e" });
    },
  },
  {
    name: "(d) a database drained, 5 - 1, 128 shards",
    fleet: (r) => roundRobin(letters(5), zipfShards(r, 128, 0.8)),
    event: (f) => {
      f.databases[2] = { ...f.databases[2]!, draining: true };
    },
  },
  {
    name: "(e) load shifts between runs (+-25%), 6 databases, 192 shards",
    fleet: (r) => roundRobin(letters(6), zipfShards(r, 192, 0.9)),
    drift: (f, r) => {
      for (const s of f.shards) s.load *= Math.exp(0.25 * normal(r) - 0.03125);
    },
  },
  {
    name: "(f) Zipf + residency: group 1 only on region=eu (2 of 6), 256 shards",
    fleet: (r) => {
      const f = roundRobin(letters(6), zipfShards(r, 256));
      f.databases = f.databases.map((d, i) => ({ ...d, labels: { region: i < 2 ? "eu" : "us" } }));
      let k = 0;
      for (const s of f.shards) if (s.shard.startsWith("1/")) f.at.set(s.shard, k++ % 2 === 0 ? "a" : "b");
      return f;
    },
    allows: (shard, db) =>
      shard.group === 1 && db.labels.region !== "eu" ? "group 1 lives in region=eu" : undefined,
  },
];

/** Runs `scenario` balanced by `strategy`: settle, event, `runs` counted runs, then 20 more on unchanged load. */
export function simulate(
  scenario: Scenario,
  strategy: Strategy,
  options: { seed?: number; runs?: number; balance?: BalanceOptions; historyRuns?: number } = {},
): SimulationResult {
  const random = prng(options.seed ?? 1);
  const fleet = scenario.fleet(random);
  const runs = options.runs ?? 20;
  const opts: BalanceOptions = {
    ...options.balance,
    ...(scenario.allows ? { allows: scenario.allows } : {}),
  };
  // The moves of the last `historyRuns` runs (default 5; 0: none), passed as `recentMoves`.
  const keep = options.historyRuns ?? 5;
  const history: { shard: string; from: string }[][] = [];
  const plan = () => {
    const figures: Record<string, { load: number; bytes: number }> = {};
    for (const s of fleet.shards)
      figures[s.shard] = {
        load: strategy === "load" ? s.load : strategy === "bytes" ? s.bytes : 1,
        bytes: s.bytes,
      };
    return planBalance(figures as ShardLoads, fleetOf(fleet), {
      ...opts,
      recentMoves: keep > 0 ? history.slice(-keep).flat() : [],
    });
  };
  const run = () => {
    const p = plan();
    for (const m of p.moves) fleet.at.set(m.shard, m.to);
    history.push(p.moves);
    return p;
  };
  if (scenario.event) {
    for (let i = 0; i < 50 && run().moves.length > 0; i++);
    scenario.event(fleet, random);
  }
  const before = ratioOf(fleet);
  const left = new Map<string, Set<string>>();
  let moves = 0;
  let bytesMoved = 0;
  let runsWithMoves = 0;
  let undone = 0;
  let hot = 0;
  for (let i = 0; i < runs; i++) {
    scenario.drift?.(fleet, random);
    const p = run();
    hot = p.hot.length;
    if (p.moves.length > 0) runsWithMoves++;
    for (const m of p.moves) {
      moves++;
      bytesMoved += m.bytes;
      if (left.get(m.shard)?.has(m.to)) undone++;
      left.set(m.shard, (left.get(m.shard) ?? new Set()).add(m.from));
    }
  }
  const after = ratioOf(fleet);
  let movesAfter = 0;
  for (let i = 0; i < 20; i++) {
    for (const m of run().moves) {
      movesAfter++;
      if (left.get(m.shard)?.has(m.to)) undone++;
      left.set(m.shard, (left.get(m.shard) ?? new Set()).add(m.from));
    }
  }
  const draining = new Set(fleet.databases.filter((d) => d.draining).map((d) => d.name));
  return {
    scenario: scenario.name,
    strategy,
    before,
    after,
    floor: floorOf(fleet),
    moves,
    bytesMoved,
    runsWithMoves,
    undone,
    movesAfter,
    hot,
    leftOnDraining: [...fleet.at.values()].filter((d) => draining.has(d)).length,
  };
}

function fleetOf(fleet: Fleet) {
  return {
    databases: fleet.databases,
    shards: fleet.shards.map((s) => ({ shard: s.shard, database: fleet.at.get(s.shard)! })),
  };
}

/** max/mean of measured load per capacity, over the databases that are not draining (the mean) and all (the max). */
export function ratioOf(fleet: Fleet): number {
  const p = planBalance(
    Object.fromEntries(fleet.shards.map((s) => [s.shard, { load: s.load }])),
    fleetOf(fleet),
    { maxMoves: 0 },
  );
  return p.before.ratio;
}

function floorOf(fleet: Fleet): number {
  const live = fleet.databases.filter((d) => !d.draining);
  const cap = live.reduce((t, d) => t + (d.capacity ?? 1), 0);
  const mean = fleet.shards.reduce((t, s) => t + s.load, 0) / cap;
  const maxCap = Math.max(...live.map((d) => d.capacity ?? 1));
  return Math.max(1, ...fleet.shards.map((s) => s.load / maxCap / mean));
}
