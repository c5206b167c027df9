import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LatencySketch, SKETCH_ALPHA, SKETCH_BUCKETS, SKETCH_MIN_MS, storedQuantiles } from "./sketch.js";
import { mergeTopKeys, SpaceSaving } from "./top-keys.js";

const exact = (sorted: number[], q: number) => sorted[Math.floor(q * (sorted.length - 1))]!;

describe("LatencySketch", () => {
  it("answers every quantile within 2% of the recorded value of that rank, merged or not", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.002, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 300 }),
        fc.array(fc.double({ min: 0.002, max: 1e6, noNaN: true }), { maxLength: 300 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (xs, ys, q) => {
          const a = new LatencySketch();
          const b = new LatencySketch();
          for (const x of xs) a.record(x);
          for (const y of ys) b.record(y);
          a.merge(LatencySketch.from(JSON.parse(JSON.stringify(b.toJSON())))!);
          const all = [...xs, ...ys].sort((x, y) => x - y);
          const want = exact(all, q);
          const got = a.quantile(q)!;
          expect(a.count).toBe(all.length);
          expect(Math.abs(got - want) / want).toBeLessThanOrEqual(SKETCH_ALPHA + 1e-9);
        },
      ),
    );
  });

  it("answers from its stored form what the sketch made from it answers (storedQuantiles)", () => {
    fc.assert(
      fc.property(
        // Unordered, repeated and out-of-range buckets, fractional and non-positive counts.
        fc.array(
          fc.tuple(
            fc.integer({ min: -2, max: SKETCH_BUCKETS + 1 }),
            fc.double({ min: -1, max: 1e6, noNaN: true }),
          ),
          {
            maxLength: 40,
          },
        ),
        fc.array(fc.double({ min: -0.5, max: 1.5, noNaN: true }), { minLength: 1, maxLength: 4 }),
        (buckets, qs) => {
          const data = { alpha: SKETCH_ALPHA, min: SKETCH_MIN_MS, buckets };
          const sketch = LatencySketch.from(data)!;
          expect(storedQuantiles(data, qs)).toEqual(qs.map((q) => sketch.quantile(q)));
        },
      ),
    );
    expect(storedQuantiles({ alpha: 0.01, min: 0.001, buckets: [[3, 1]] }, [0.5])).toEqual([undefined]);
    expect(storedQuantiles(null, [0.5, 0.99])).toEqual([undefined, undefined]);
  });

  it("is empty until recorded; refuses a stored sketch with other parameters", () => {
    expect(new LatencySketch().quantile(0.5)).toBeUndefined();
    expect(LatencySketch.from({ alpha: 0.01, min: 0.001, buckets: [] })).toBeNull();
    expect(new LatencySketch().toJSON().buckets).toEqual([]);
  });
});

describe("SpaceSaving", () => {
  it("holds every key seen more than n/k times, and each count is an upper bound within its error", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 400 }),
        fc.integer({ min: 1, max: 12 }),
        (stream, k) => {
          const s = new SpaceSaving(k);
          const truth = new Map<string, number>();
          for (const v of stream) {
            s.add(String(v));
            truth.set(String(v), (truth.get(String(v)) ?? 0) + 1);
          }
          const top = s.top();
          expect(top.length).toBeLessThanOrEqual(k);
          for (const t of top) {
            const real = truth.get(t.key)!;
            expect(t.count).toBeGreaterThanOrEqual(real);
            expect(t.count - t.error).toBeLessThanOrEqual(real);
          }
          const held = new Set(top.map((t) => t.key));
          for (const [key, n] of truth) if (n > stream.length / k) expect(held.has(key)).toBe(true);
        },
      ),
    );
  });

  it("merges lists: counts of one key add up, a key missing from a full list may have had its smallest count there", () => {
    const merged = mergeTopKeys(
      [
        [
          { key: "a", count: 5, error: 0 },
          { key: "b", count: 2, error: 0 },
        ],
        [
          { key: "a", count: 1, error: 0 },
          { key: "c", count: 4, error: 1 },
        ],
      ],
      2,
    );
    // Both lists are full (k = 2): b may have had 1 in the second, c 2 in the first.
    expect(merged).toEqual([
      { key: "a", count: 6, error: 0 },
      { key: "c", count: 6, error: 3 },
    ]);
  });
});
