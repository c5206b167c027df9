// How the benches time calls: every variant's call, interleaved in a rotating order (ABC, BCA, CAB,
// ...) so a noisy disk or CPU hits every variant alike, after warm-up calls; medians.

export type Variant = { name: string; run: (i: number) => PromiseLike<unknown> };

export const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

/** Median latency (ms) of each variant over `rounds` calls, after `warmup` calls each. */
export async function measure(variants: Variant[], warmup: number, rounds: number): Promise<number[]> {
  const samples = variants.map(() => [] as number[]);
  for (let i = 0; i < warmup; i++) for (const v of variants) await v.run(i);
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < variants.length; k++) {
      const j = (i + k) % variants.length;
      const start = performance.now();
      await variants[j]!.run(warmup + i);
      samples[j]!.push(performance.now() - start);
    }
  }
  return samples.map(median);
}
