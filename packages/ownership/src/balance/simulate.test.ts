import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { SCENARIOS, simulate } from "./simulate.js";

// The goals of the balancer, on the simulator's fleets (seed 1; bench/balance-sim.ts prints them all).
// Whole simulated fleets, pure CPU: the time limit scales with the machine's load.
describe("balancing simulated fleets by measured load", { timeout: patient(30_000) }, () => {
  it.each(SCENARIOS.map((s) => [s.name, s] as const))("%s", (_, scenario) => {
    const byLoad = simulate(scenario, "load");
    const byBytes = simulate(scenario, "bytes");
    // Within 1.15, or at the floor a hot shard sets (it ends alone on its database).
    expect(byLoad.after).toBeLessThanOrEqual(Math.max(1.15, byLoad.floor + 1e-9));
    // More even than balancing by bytes gets.
    expect(byLoad.after).toBeLessThan(byBytes.after);
    expect(byLoad.leftOnDraining).toBe(0);
    if (!scenario.drift) {
      // Stable load: no move undone, with or without history, and nothing more to do after.
      expect(byLoad.undone).toBe(0);
      expect(simulate(scenario, "load", { historyRuns: 0 }).undone).toBe(0);
      expect(byLoad.movesAfter).toBe(0);
    }
  });

  it("is deterministic: the same seed gives the same figures", () => {
    const scenario = SCENARIOS.at(-1)!;
    expect(simulate(scenario, "load", { seed: 7 })).toEqual(simulate(scenario, "load", { seed: 7 }));
    expect(simulate(scenario, "load", { seed: 8 })).not.toEqual(simulate(scenario, "load", { seed: 7 }));
  });
});
