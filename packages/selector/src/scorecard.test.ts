import { thrownBy } from "@shardkit/vitest-config/errors";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SelectorError } from "./errors.js";
import { analyzeShardKey, type ShardKeySample } from "./scorecard.js";
import { createShardSelector } from "./selector.js";

const memberOf = (key: string, members: number[]) =>
  createShardSelector({ routingKey: "k", groups: [{ group: 0, members }], defaultGroup: 0 }).select({
    k: key,
  }).member;

/** Two keys that hash to different members of 0..3, and one that shares the first one's member. */
function keysOnMembers() {
  const members = [0, 1, 2, 3];
  const a = "key-a";
  let same = "";
  let other = "";
  for (let i = 0; !same || !other; i++) {
    const k = `key-${i}`;
    if (k === a) continue;
    if (memberOf(k, members) === memberOf(a, members)) same ||= k;
    else other ||= k;
  }
  return { a, same, other, members };
}

const thrown = (fn: () => unknown) => thrownBy(fn, SelectorError);

describe("analyzeShardKey", () => {
  it("counts operations, reads, writes, traffic and cardinality", () => {
    const card = analyzeShardKey(
      [
        { key: "a", cost: 10, op: "write" },
        { key: "a", cost: 5 },
        { key: "b", cost: 1, op: "read" },
        { key: 7 },
        { key: "7", cost: 2 },
        { key: 7n, op: "write" },
      ],
      { members: 4 },
    );
    expect(card).toMatchObject({ operations: 6, reads: 4, writes: 2, traffic: 20, cardinality: 3 });
    expect(card.top.map((t) => [t.key, t.operations, t.traffic])).toEqual([
      ["a", 2, 15],
      ["7", 3, 4],
      ["b", 1, 1],
    ]);
    expect(card.topShare).toBe(1);
    expect(card.members).toEqual([0, 1, 2, 3]);
  });

  it("puts each key on the member the selector would choose", () => {
    const members = [3, 9, 27, 40, 63];
    const samples = Array.from({ length: 200 }, (_, i) => ({ key: `tenant-${i}`, cost: i + 1 }));
    const card = analyzeShardKey(samples, { members, top: 200 });
    expect(card.top).toHaveLength(200);
    for (const entry of card.top) expect(entry.member).toBe(memberOf(entry.key, members));
    const expected = members.map(() => 0);
    for (const s of samples) expected[members.indexOf(memberOf(s.key, members))]! += s.cost;
    expect(card.load.traffic).toEqual(expected);
  });

  it("measures imbalance by traffic, not by key count", () => {
    const samples: ShardKeySample[] = [];
    for (let i = 0; i < 8000; i++) samples.push({ key: `small-${i}` });
    samples.push({ key: "whale", cost: 8000 }); // one key as heavy as all the others together
    const card = analyzeShardKey(samples, { members: 8, top: 1 });
    expect(card.cardinality).toBe(8001);
    expect(card.top[0]).toMatchObject({ key: "whale", share: 0.5 });
    expect(card.topShare).toBe(0.5);
    expect(card.load.keyImbalance).toBeLessThan(1.1); // rows look balanced...
    expect(card.load.imbalance).toBeGreaterThan(4.4); // ...the whale's member serves over half the traffic
    expect(card.load.hottestMember).toBe(card.top[0]!.member);
  });

  it("is close to 1 for many evenly used keys", () => {
    const card = analyzeShardKey(
      Array.from({ length: 100_000 }, (_, i) => ({ key: i, op: i % 2 === 0 ? "write" : "read" }) as const),
      { members: 16 },
    );
    expect(card.load.imbalance).toBeLessThan(1.05);
    expect(card.load.writeImbalance).toBeLessThan(1.06);
    expect(card.top[0]!.share).toBe(1e-5);
  });

  it("counts operations that lose locality: keyless ones and those spanning members", () => {
    const { a, same, other } = keysOnMembers();
    const card = analyzeShardKey(
      [
        { key: a },
        { key: a, touches: [same] },
        { key: a, touches: [other], cost: 3, op: "write" },
        { key: null, cost: 2 },
        { key: undefined },
        { key: "" },
      ],
      { members: 4 },
    );
    expect(card.locality).toEqual({ local: 2, crossMember: 1, keyless: 3, lostShare: 4 / 6 });
    expect(card.cardinality).toBe(1); // touched keys are not counted as the operations' own keys
    // keyless operations are charged to every member; the cross-member one to both members it touches
    const home = memberOf(a, [0, 1, 2, 3]);
    const away = memberOf(other, [0, 1, 2, 3]);
    expect(card.load.traffic[home]).toBe(1 + 1 + 3 + 4);
    expect(card.load.traffic[away]).toBe(3 + 4);
    expect(card.load.writeTraffic[away]).toBe(3);
    expect(card.traffic).toBe(9);
  });

  it("accepts any iterable, including a generator, and an empty sample", () => {
    function* stream() {
      for (let i = 0; i < 10; i++) yield { key: `k${i % 3}` };
    }
    expect(analyzeShardKey(stream(), { members: 2 }).cardinality).toBe(3);
    const empty = analyzeShardKey([], { members: 2 });
    expect(empty).toMatchObject({ operations: 0, cardinality: 0, top: [], topShare: 0 });
    expect(empty.load.imbalance).toBe(1);
    expect(empty.locality.lostShare).toBe(0);
  });

  it("every operation's traffic is accounted for (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            key: fc.option(fc.string({ minLength: 1, maxLength: 4 }), { nil: null }),
            cost: fc.integer({ min: 0, max: 1000 }),
            op: fc.constantFrom("read" as const, "write" as const),
          }),
        ),
        fc.integer({ min: 1, max: 64 }),
        (samples, members) => {
          const card = analyzeShardKey(samples, { members });
          const keyed = samples.filter((s) => s.key !== null);
          const keyless = samples.length - keyed.length;
          const perMember = card.load.traffic.reduce((a, b) => a + b, 0);
          const keylessCost = samples.filter((s) => s.key === null).reduce((a, s) => a + s.cost, 0);
          const keyedCost = keyed.reduce((a, s) => a + s.cost, 0);
          expect(perMember).toBe(keyedCost + keylessCost * members);
          expect(card.locality.keyless).toBe(keyless);
          expect(card.load.keys.reduce((a, b) => a + b, 0)).toBe(card.cardinality);
          expect(card.load.imbalance).toBeGreaterThanOrEqual(1);
          expect(card.load.imbalance).toBeLessThanOrEqual(members + 1e-9);
        },
      ),
      { seed: 9, numRuns: 300 },
    );
  });

  it("charges each operation once to every member its keys live on, up to 64 members (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            key: fc.option(fc.integer({ min: 0, max: 40 }), { nil: null }),
            touches: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 4 }),
            cost: fc.integer({ min: 0, max: 1000 }),
            op: fc.constantFrom("read" as const, "write" as const),
          }),
          { maxLength: 60 },
        ),
        fc.oneof(
          fc.integer({ min: 1, max: 64 }),
          fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { minLength: 1, maxLength: 64 }),
        ),
        (raw, members) => {
          const samples = raw.map((s) => ({ ...s, key: s.key === null ? null : `k${s.key}` }));
          const list =
            typeof members === "number"
              ? Array.from({ length: members }, (_, i) => i)
              : [...members].sort((a, b) => a - b);
          const selector = createShardSelector({
            routingKey: "k",
            groups: [{ group: 0, members: list }],
            defaultGroup: 0,
          });
          const home = (key: string | number) => list.indexOf(selector.select({ k: String(key) }).member);
          const traffic = list.map(() => 0);
          const writeTraffic = list.map(() => 0);
          let local = 0;
          let cross = 0;
          for (const s of samples) {
            const on =
              s.key === null
                ? list.map((_, i) => i)
                : [...new Set([home(s.key), ...s.touches.map((t) => home(`k${t}`))])];
            if (s.key !== null) {
              if (on.length === 1) local++;
              else cross++;
            }
            for (const i of on) {
              traffic[i]! += s.cost;
              if (s.op === "write") writeTraffic[i]! += s.cost;
            }
          }
          const card = analyzeShardKey(
            samples.map((s) => ({ ...s, touches: s.touches.map((t) => `k${t}`) })),
            { members },
          );
          expect(card.load.traffic).toEqual(traffic);
          expect(card.load.writeTraffic).toEqual(writeTraffic);
          expect(card.locality).toMatchObject({ local, crossMember: cross });
        },
      ),
      { seed: 11, numRuns: 300 },
    );
  });

  it("refuses bad options and samples, naming the sample", () => {
    for (const members of [0, 65, 1.5, [], [1, 1], [64], "8"]) {
      expect(thrown(() => analyzeShardKey([], { members: members as never })).code).toBe(
        "INVALID_SCORECARD_INPUT",
      );
    }
    expect(thrown(() => analyzeShardKey([], { members: 2, top: -1 })).message).toBe(
      "options.top must be an integer >= 0, got -1",
    );
    const bad: [ShardKeySample, string][] = [
      [{ key: "a", cost: -1 }, "samples[1].cost must be a finite number >= 0, got -1"],
      [{ key: "a", cost: Number.NaN }, "samples[1].cost must be a finite number >= 0, got NaN"],
      [{ key: "a", op: "delete" as never }, 'samples[1].op must be "read" or "write", got delete'],
      [
        { key: {} as never },
        "samples[1].key must be a string, a finite number, a bigint or null, got object",
      ],
      [{ key: "a", touches: [null as never] }, "samples[1].touches[0] must be a key value"],
    ];
    for (const [sample, message] of bad) {
      const err = thrown(() => analyzeShardKey([{ key: "ok" }, sample], { members: 2 }));
      expect(err.code).toBe("INVALID_SCORECARD_INPUT");
      expect(err.message).toBe(message);
    }
  });
});
