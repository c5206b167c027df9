// A fixed-size latency sketch with a relative error bound (the DDSketch idea: logarithmic buckets),
// mergeable across windows and routers by adding bucket counts.

/** Relative accuracy of every quantile the sketch answers: within 2% of a value that was recorded. */
export const SKETCH_ALPHA = 0.02;
/** The smallest value kept apart (ms): smaller values (and 0) count in the lowest bucket. */
export const SKETCH_MIN_MS = 0.001;
const GAMMA = (1 + SKETCH_ALPHA) / (1 - SKETCH_ALPHA);
const LN_GAMMA = Math.log(GAMMA);
/** Buckets: 1 µs to about 3 hours with 2% accuracy; larger values count in the top bucket. */
export const SKETCH_BUCKETS = Math.ceil(Math.log(1e7 / SKETCH_MIN_MS) / LN_GAMMA) + 1;

/**
 * How a sketch is stored (the `sketch` column of `shardkit."ShardLoad"`): its parameters and its
 * non-empty buckets as `[index, count]` pairs, in index order. Bucket `i > 0` holds the values in
 * `(min·γ^(i-1), min·γ^i]`, bucket 0 everything up to `min`, with γ = (1+α)/(1-α).
 */
export interface SketchData {
  alpha: number;
  min: number;
  buckets: [number, number][];
}

/** The bucket of a value (ms). */
export function bucketOf(ms: number): number {
  if (!(ms > SKETCH_MIN_MS)) return 0;
  const i = Math.ceil(Math.log(ms / SKETCH_MIN_MS) / LN_GAMMA);
  return i < SKETCH_BUCKETS ? i : SKETCH_BUCKETS - 1;
}

/** The value a bucket stands for: within α of every value in it. */
export function bucketValue(bucket: number): number {
  if (bucket === 0) return SKETCH_MIN_MS;
  return (SKETCH_MIN_MS * 2 * GAMMA ** bucket) / (GAMMA + 1);
}

/**
 * The quantiles `qs` of a sketch in its stored form, as `LatencySketch.from(data)?.quantile(q)` gives
 * them (undefined for one made with other parameters, or empty), without making the sketch: a walk
 * over its few buckets rather than over all `SKETCH_BUCKETS` (the dashboard asks for three of each of
 * a thousand shards).
 */
export function storedQuantiles(data: unknown, qs: readonly number[]): (number | undefined)[] {
  const d = data as Partial<SketchData> | null;
  if (!d || d.alpha !== SKETCH_ALPHA || d.min !== SKETCH_MIN_MS || !Array.isArray(d.buckets))
    return qs.map(() => undefined);
  // Each bucket's count and the total, added in the stored order as `from` adds them.
  const counts = new Map<number, number>();
  let count = 0;
  for (const pair of d.buckets) {
    const [i, n] = pair as [number, number];
    if (Number.isInteger(i) && i >= 0 && i < SKETCH_BUCKETS && n > 0) {
      counts.set(i, (counts.get(i) ?? 0) + n);
      count += n;
    }
  }
  if (count === 0) return qs.map(() => undefined);
  const buckets = [...counts.entries()].sort(([x], [y]) => x - y);
  return qs.map((q) => {
    const rank = Math.floor(Math.min(Math.max(q, 0), 1) * (count - 1));
    // Under one count in all (fractional counts), the rank is -1: the first bucket, empty or not.
    if (rank < 0) return bucketValue(0);
    let seen = 0;
    for (const [i, n] of buckets) {
      seen += n;
      if (seen > rank) return bucketValue(i);
    }
    return bucketValue(SKETCH_BUCKETS - 1);
  });
}

/**
 * Latencies (ms) in logarithmic buckets: `quantile(q)` is within 2% (relative) of the recorded value
 * of rank ⌊q·(n-1)⌋, whatever the values' spread (1 µs to about 3 hours). Fixed size; recording is
 * a log, a division and an array increment.
 */
export class LatencySketch {
  readonly counts = new Float64Array(SKETCH_BUCKETS);
  count = 0;

  record(ms: number, times = 1): void {
    this.counts[bucketOf(ms)]! += times;
    this.count += times;
  }

  /** Adds `other`'s counts to this one. */
  merge(other: LatencySketch): void {
    for (let i = 0; i < SKETCH_BUCKETS; i++) this.counts[i]! += other.counts[i]!;
    this.count += other.count;
  }

  /** The value of rank ⌊q·(n-1)⌋ (0 ≤ q ≤ 1), within 2%; undefined when empty. */
  quantile(q: number): number | undefined {
    if (this.count === 0) return undefined;
    const rank = Math.floor(Math.min(Math.max(q, 0), 1) * (this.count - 1));
    let seen = 0;
    for (let i = 0; i < SKETCH_BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen > rank) return bucketValue(i);
    }
    return bucketValue(SKETCH_BUCKETS - 1);
  }

  clear(): void {
    this.counts.fill(0);
    this.count = 0;
  }

  toJSON(): SketchData {
    const buckets: [number, number][] = [];
    for (let i = 0; i < SKETCH_BUCKETS; i++) if (this.counts[i]! > 0) buckets.push([i, this.counts[i]!]);
    return { alpha: SKETCH_ALPHA, min: SKETCH_MIN_MS, buckets };
  }

  /** A sketch from its stored form; null when it was made with other parameters (it cannot merge). */
  static from(data: unknown): LatencySketch | null {
    const d = data as Partial<SketchData> | null;
    if (!d || d.alpha !== SKETCH_ALPHA || d.min !== SKETCH_MIN_MS || !Array.isArray(d.buckets)) return null;
    const sketch = new LatencySketch();
    for (const pair of d.buckets) {
      const [i, n] = pair as [number, number];
      if (Number.isInteger(i) && i >= 0 && i < SKETCH_BUCKETS && n > 0) {
        sketch.counts[i]! += n;
        sketch.count += n;
      }
    }
    return sketch;
  }
}
