import { ShardIdentifier } from "@shardkit/id";
import type { PlacementCheck } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planBalance } from "./plan.js";
import type { BalanceFleet, BalanceOptions, BalancePlan, ShardLoads } from "./types.js";

// planBalance over generated fleets: 2 to 6 databases (some draining, some of capacity 2, labelled
// by region), 4 to 48 shards (half of them on the first database) of groups 0..3 with skewed load and bytes, and residency rules that
// keep some groups out of some regions.

interface World {
  load: ShardLoads;
  fleet: BalanceFleet;
  forbidden: [number, string][];
  maxMoves: number;
  threshold: number;
  secondary: "bytes" | "none";
  maxBytes: number;
}

const REGIONS = ["eu", "us"];

const world = (opts: { draining: boolean }): fc.Arbitrary<World> =>
  fc
    .record({
      dbs: fc.array(
        fc.record({
          region: fc.constantFrom(...REGIONS),
          capacity: fc.constantFrom(1, 1, 2),
          draining: opts.draining ? fc.boolean() : fc.constant(false),
        }),
        { minLength: 2, maxLength: 6 },
      ),
      shards: fc.uniqueArray(
        fc.record({
          bits: fc.integer({ min: 0, max: 4 * 64 - 1 }),
          load: fc.oneof(
            fc.constant(0),
            fc.double({ min: 0, max: 100, noNaN: true }),
            fc.integer({ min: 0, max: 5 }),
          ),
          hot: fc.boolean(),
          bytes: fc.integer({ min: 0, max: 1_000_000 }),
          // Half the shards start on db0: fleets out of balance.
          on: fc.oneof(fc.constant(0), fc.nat()),
        }),
        { minLength: 4, maxLength: 48, selector: (s) => s.bits },
      ),
      forbidden: fc.uniqueArray(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.constantFrom(...REGIONS)), {
        maxLength: 3,
      }),
      maxMoves: fc.constantFrom(0, 1, 4, 4, 4, Number.POSITIVE_INFINITY),
      threshold: fc.constantFrom(0, 0.05, 0.1, 0.1, 0.1, 0.5),
      secondary: fc.constantFrom("bytes" as const, "none" as const),
      maxBytes: fc.constantFrom(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, 1_500_000),
    })
    .map(({ dbs, shards, forbidden, maxMoves, threshold, secondary, maxBytes }) => ({
      load: Object.fromEntries(
        shards.map((s) => [
          ShardIdentifier.fromBits(s.bits).key,
          { load: s.hot ? s.load * 10 : s.load, bytes: s.bytes },
        ]),
      ),
      fleet: {
        databases: dbs.map((d, i) => ({
          name: `db${i}`,
          labels: { region: d.region },
          capacity: d.capacity,
          draining: d.draining,
        })),
        shards: shards.map((s) => ({
          shard: ShardIdentifier.fromBits(s.bits).key,
          database: `db${s.on % dbs.length}`,
        })),
      },
      forbidden,
      maxMoves,
      threshold,
      secondary,
      maxBytes,
    }));

const rule =
  (forbidden: [number, string][]): PlacementCheck =>
  (shard, db) =>
    forbidden.some(([g, region]) => g === shard.group && db.labels.region === region)
      ? `group ${shard.group} not in ${db.labels.region}`
      : undefined;

const optionsOf = (w: World): BalanceOptions => ({
  allows: rule(w.forbidden),
  maxMoves: w.maxMoves,
  threshold: w.threshold,
  secondary: w.secondary,
  maxBytes: w.maxBytes,
});

/** The world's options with no limit on moves or bytes moved. */
const unlimitedOptionsOf = (w: World): BalanceOptions => ({
  ...optionsOf(w),
  maxMoves: Number.POSITIVE_INFINITY,
  maxBytes: Number.POSITIVE_INFINITY,
});

/** The fleet with the plan's moves applied. */
function applied(fleet: BalanceFleet, plan: BalancePlan): BalanceFleet {
  const to = new Map(plan.moves.map((m) => [m.shard, m.to]));
  return {
    ...fleet,
    shards: fleet.shards.map((s) => ({ ...s, database: to.get(s.shard) ?? s.database })),
  };
}

const RUNS = { numRuns: Number(process.env.BALANCE_RUNS ?? 300) };

// Hundreds of generated fleets per property, pure CPU: the time limit scales with the machine's load.
describe("planBalance properties", { timeout: patient(30_000) }, () => {
  it("never proposes a move a rule forbids or onto a draining database, each from where the shard is then; at most maxMoves and maxBytes", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const plan = planBalance(w.load, w.fleet, optionsOf(w));
        const allows = rule(w.forbidden);
        const db = new Map(w.fleet.databases.map((d) => [d.name, d]));
        const where = new Map(w.fleet.shards.map((s) => [s.shard, s.database]));
        expect(plan.moves.length).toBeLessThanOrEqual(w.maxMoves);
        expect(plan.moves.reduce((t, m) => t + m.bytes, 0)).toBeLessThanOrEqual(w.maxBytes);
        for (const m of plan.moves) {
          expect(where.get(m.shard)).toBe(m.from);
          expect(m.to).not.toBe(m.from);
          expect(db.get(m.to)!.draining).toBe(false);
          expect(
            allows(ShardIdentifier.parse(m.shard), { name: m.to, labels: db.get(m.to)!.labels! }),
          ).toBeUndefined();
          if (m.kind === "balance") expect(plan.hot.map((h) => h.shard)).not.toContain(m.shard);
          where.set(m.shard, m.to);
        }
        // `after` is the fleet with the moves applied.
        expect(planBalance(w.load, applied(w.fleet, plan), { maxMoves: 0 }).before).toEqual(plan.after);
      }),
      RUNS,
    );
  });

  it("never raises the highest database load (per capacity) when nothing drains; each move lowers the higher of its two", () => {
    let planned = 0;
    fc.assert(
      fc.property(world({ draining: false }), (w) => {
        const plan = planBalance(w.load, w.fleet, optionsOf(w));
        if (plan.moves.length > 0) planned++;
        expect(plan.after.max).toBeLessThanOrEqual(plan.before.max * (1 + 1e-9));
        for (const m of plan.moves) expect(Math.max(m.after.from, m.after.to)).toBeLessThan(m.before.from);
      }),
      RUNS,
    );
    // Not vacuous: a good share of the generated fleets need moves.
    expect(planned).toBeGreaterThan(RUNS.numRuns / 5);
  });

  it("is deterministic: the same figures in another order give the same plan", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const shuffled: BalanceFleet = {
          databases: [...w.fleet.databases].reverse(),
          shards: [...w.fleet.shards].reverse(),
        };
        const load = Object.fromEntries(Object.entries(w.load).reverse());
        expect(planBalance(load, shuffled, optionsOf(w))).toEqual(planBalance(w.load, w.fleet, optionsOf(w)));
      }),
      RUNS,
    );
  });

  it("does not flap: over 20 runs on stable load, given its history (recentMoves), it never moves a shard back to a database it left; once a run proposes nothing, none does", () => {
    let moved = 0;
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        let fleet = w.fleet;
        const history: BalancePlan["moves"] = [];
        let settled = false;
        for (let run = 0; run < 20; run++) {
          const plan = planBalance(w.load, fleet, { ...optionsOf(w), recentMoves: history });
          if (settled) expect(plan.moves).toEqual([]);
          if (plan.moves.length === 0) settled = true;
          for (const m of plan.moves) {
            expect(history.some((h) => h.shard === m.shard && h.from === m.to)).toBe(false);
            history.push(m);
          }
          fleet = applied(fleet, plan);
          moved += plan.moves.length;
        }
      }),
      { numRuns: Number(process.env.BALANCE_RUNS ?? 150) },
    );
    expect(moved).toBeGreaterThan(Number(process.env.BALANCE_RUNS ?? 150));
  });

  it("without its history, a plan never moves a shard back within itself; once a run proposes nothing, none does", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        let fleet = w.fleet;
        let settled = false;
        for (let run = 0; run < 20; run++) {
          const plan = planBalance(w.load, fleet, optionsOf(w));
          if (settled) expect(plan.moves).toEqual([]);
          if (plan.moves.length === 0) settled = true;
          plan.moves.forEach((m, i) => {
            expect(plan.moves.slice(0, i).some((h) => h.shard === m.shard && h.from === m.to)).toBe(false);
          });
          fleet = applied(fleet, plan);
        }
      }),
      { numRuns: Number(process.env.BALANCE_RUNS ?? 150) },
    );
  });

  it("with no move limit, runs on stable load settle: by the third, a run (given the moves before it) proposes nothing", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const options = unlimitedOptionsOf(w);
        let fleet = w.fleet;
        const history: BalancePlan["moves"] = [];
        for (let run = 1; run <= 3; run++) {
          const plan = planBalance(w.load, fleet, { ...options, recentMoves: history });
          expect(["balanced", "no-load", "no-move"]).toContain(plan.stoppedBy);
          if (run === 3) expect(plan.moves).toEqual([]);
          history.push(...plan.moves);
          fleet = applied(fleet, plan);
        }
      }),
      RUNS,
    );
  });

  it("empties draining databases wherever a database may take the shard, and names the rules where none may", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const plan = planBalance(w.load, w.fleet, unlimitedOptionsOf(w));
        const allows = rule(w.forbidden);
        const live = w.fleet.databases.filter((d) => !d.draining);
        const draining = new Set(w.fleet.databases.filter((d) => d.draining).map((d) => d.name));
        for (const s of applied(w.fleet, plan).shards) {
          if (!draining.has(s.database)) continue;
          const id = ShardIdentifier.parse(s.shard);
          expect(live.every((d) => allows(id, { name: d.name, labels: d.labels! }) !== undefined)).toBe(true);
          const skip = plan.skipped.find((k) => k.shard === s.shard);
          expect(skip?.reason).toMatch(
            live.length > 0
              ? /is draining, but no database may take it \(.*not in/
              : /no database that is not draining/,
          );
        }
      }),
      RUNS,
    );
  });

  it("moves each shard at most once in a plan (drained or balanced, never both, never twice)", () => {
    let drainedThenOver = 0;
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const plan = planBalance(w.load, w.fleet, {
          ...optionsOf(w),
          maxMoves: Number.POSITIVE_INFINITY,
        });
        const shards = plan.moves.map((m) => m.shard);
        expect(new Set(shards).size).toBe(shards.length);
        if (plan.moves.some((m) => m.kind === "drain") && plan.moves.some((m) => m.kind === "balance"))
          drainedThenOver++;
      }),
      RUNS,
    );
    // Not vacuous: plans that drain and then balance are among those generated.
    expect(drainedThenOver).toBeGreaterThan(RUNS.numRuns / 20);
  });

  it("drainOnly: moves exactly the shards of the draining databases that a database may take, each once, to one not draining; nothing else", () => {
    fc.assert(
      fc.property(world({ draining: true }), (w) => {
        const options = unlimitedOptionsOf(w);
        const plan = planBalance(w.load, w.fleet, { ...options, drainOnly: true });
        const draining = new Set(w.fleet.databases.filter((d) => d.draining).map((d) => d.name));
        const live = w.fleet.databases.filter((d) => !d.draining);
        const allows = rule(w.forbidden);
        const mayLeave = w.fleet.shards.filter(
          (s) =>
            draining.has(s.database) &&
            live.some(
              (d) =>
                allows(ShardIdentifier.parse(s.shard), { name: d.name, labels: d.labels! }) === undefined,
            ),
        );
        expect(plan.moves.map((m) => m.shard).sort()).toEqual(mayLeave.map((s) => s.shard).sort());
        for (const m of plan.moves) {
          expect(m.kind).toBe("drain");
          expect(draining.has(m.from)).toBe(true);
          expect(draining.has(m.to)).toBe(false);
        }
        expect(plan.stoppedBy).toBe("drained");
        // The same shards leave as in a full plan: drainOnly only leaves out the balancing.
        const full = planBalance(w.load, w.fleet, options).moves.filter((m) => m.kind === "drain");
        const pairs = (ms: typeof full) => ms.map((m) => `${m.shard}@${m.from}`).sort();
        expect(pairs(plan.moves)).toEqual(pairs(full));
      }),
      RUNS,
    );
  });

  it("reaches max/mean within the threshold when shards are small and nothing forbids a move", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.array(fc.integer({ min: 1, max: 10 }), { minLength: 48, maxLength: 64 }),
        fc.nat(),
        (n, figures, seed) => {
          const load = Object.fromEntries(figures.map((l, i) => [`0/${i}`, { load: l }]));
          const fleet = {
            databases: Array.from({ length: n }, (_, i) => ({ name: `db${i}` })),
            shards: figures.map((_, i) => ({
              shard: `0/${i}`,
              database: `db${(i * seed) % n === 0 ? 0 : i % 2}`,
            })),
          };
          const total = figures.reduce((a, b) => a + b, 0);
          // Every shard is at most a quarter of the mean: a greedy mover can always get within 1.1 + a shard.
          fc.pre(Math.max(...figures) <= total / n / 4);
          const plan = planBalance(load, fleet, { maxMoves: Number.POSITIVE_INFINITY, threshold: 0.1 });
          expect(plan.after.ratio).toBeLessThanOrEqual(1.1 + 1e-9 + Math.max(...figures) / (total / n));
        },
      ),
      RUNS,
    );
  });
});
