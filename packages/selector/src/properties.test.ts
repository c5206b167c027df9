import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { MemberConfig } from "./config.js";
import { createShardSelector } from "./selector.js";

/** mulberry32: a tiny seeded PRNG, so every "random" key set is the same on every run. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = 100_000;
const random = prng(0x5eed);
const keys = Array.from(
  { length: KEYS },
  (_, i) => `tenant-${i}-${Math.floor(random() * 2 ** 48).toString(36)}`,
);

function selector(members: readonly MemberConfig[]) {
  return createShardSelector({ routingKey: "tenantId", groups: [{ group: 2, members }], defaultGroup: 2 });
}
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
const placements = (members: readonly MemberConfig[]) => {
  const s = selector(members);
  return keys.map((tenantId) => s.select({ tenantId }).member);
};

/** Chi-square critical values at p = 0.001 (the test fails for a fair hash once in a thousand seeds; the seed is fixed). */
const CHI2_CRITICAL_P001: Record<number, number> = { 7: 24.32, 63: 103.44 };

function chiSquare(observed: readonly number[], expected: readonly number[]): number {
  return observed.reduce((sum, o, i) => sum + (o - expected[i]!) ** 2 / expected[i]!, 0);
}

describe("member hashing properties", () => {
  it("is deterministic: the same row always gets the same shard, from a fresh selector too", () => {
    const members = range(16);
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (tenantId) => {
        const a = selector(members).select({ tenantId });
        expect(selector(members).select({ tenantId })).toBe(a);
        expect(selector([...members].reverse()).select({ tenantId })).toBe(a);
      }),
      { numRuns: 300, seed: 1 },
    );
  });

  it.each([8, 64])("spreads 1e5 random keys uniformly over %i members (chi-square, p = 0.001)", (n) => {
    const counts = new Array<number>(n).fill(0);
    for (const member of placements(range(n))) counts[member]!++;
    const chi2 = chiSquare(
      counts,
      counts.map(() => KEYS / n),
    );
    expect(chi2).toBeLessThan(CHI2_CRITICAL_P001[n - 1]!);
  });

  it("spreads keys over non-contiguous members in proportion to their weights (chi-square, p = 0.001)", () => {
    const members = [
      { member: 1, weight: 1 },
      { member: 9, weight: 2 },
      { member: 20, weight: 3 },
      { member: 33, weight: 0.5 },
      { member: 41, weight: 1 },
      { member: 50, weight: 1.5 },
      { member: 58, weight: 4 },
      { member: 63, weight: 1 },
    ];
    const total = members.reduce((sum, m) => sum + m.weight, 0);
    const counts = new Map(members.map((m) => [m.member, 0]));
    for (const member of placements(members)) counts.set(member, counts.get(member)! + 1);
    const chi2 = chiSquare(
      members.map((m) => counts.get(m.member)!),
      members.map((m) => (KEYS * m.weight) / total),
    );
    expect(chi2).toBeLessThan(CHI2_CRITICAL_P001[7]!);
  });

  it.each([1, 2, 7, 8, 16, 63])(
    "adding a member to %i moves about 1/(n+1) of the keys (within 20%), all of them to the new member",
    (n) => {
      const before = placements(range(n));
      const after = placements(range(n + 1));
      let moved = 0;
      let elsewhere = 0;
      for (let i = 0; i < KEYS; i++) {
        if (before[i] === after[i]) continue;
        moved++;
        if (after[i] !== n) elsewhere++;
      }
      expect(elsewhere).toBe(0);
      const expected = 1 / (n + 1);
      expect(Math.abs(moved / KEYS - expected) / expected).toBeLessThan(0.2);
    },
  );

  it("adding a weighted member moves keys only to it, about weight / (total weight) of them", () => {
    const members = range(8).map((member) => ({ member, weight: 1 }));
    const before = placements(members);
    const after = placements([...members, { member: 30, weight: 2 }]);
    let moved = 0;
    let elsewhere = 0;
    for (let i = 0; i < KEYS; i++) {
      if (before[i] === after[i]) continue;
      moved++;
      if (after[i] !== 30) elsewhere++;
    }
    expect(elsewhere).toBe(0);
    expect(Math.abs(moved / KEYS - 0.2) / 0.2).toBeLessThan(0.2);
  });

  it("draining members receive nothing new, and only their keys move elsewhere", () => {
    const active = range(8);
    const before = placements(active);
    const draining = [2, 5];
    const after = placements(
      active.map((member) => (draining.includes(member) ? { member, draining: true } : member)),
    );
    let onDraining = 0;
    let movedNeedlessly = 0;
    let movedOff = 0;
    for (let i = 0; i < KEYS; i++) {
      if (draining.includes(after[i]!)) onDraining++;
      if (draining.includes(before[i]!)) movedOff++;
      else if (after[i] !== before[i]) movedNeedlessly++;
    }
    expect(onDraining).toBe(0);
    expect(movedNeedlessly).toBe(0);
    expect(Math.abs(movedOff / KEYS - 2 / 8) / (2 / 8)).toBeLessThan(0.2);
  });

  it("draining never receives anything for any member set and key (property)", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { minLength: 2, maxLength: 64 }),
        fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
        fc.string({ minLength: 1 }),
        (members, drainFlags, tenantId) => {
          const config = members.map((member, i) => ({ member, draining: i > 0 && drainFlags[i]! }));
          const chosen = selector(config).select({ tenantId }).member;
          expect(config.find((m) => m.member === chosen)?.draining).toBe(false);
        },
      ),
      { numRuns: 500, seed: 3 },
    );
  });
});
