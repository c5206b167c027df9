// A balance run's pause: before a move, wait while another shard's p99 is above the bound.
import type { ShardClient, ShardRegistry } from "@shardkit/prisma";
import { sumLoad } from "./measure.js";

/** A pause: which shard's p99 is above the bound, and how long the run has waited. */
export interface Pause {
  /** The shard whose p99 is above the bound ("" when a database does not answer). */
  shard: string;
  /** Why the run waits, in a sentence. */
  why: string;
  p99Ms: number;
  boundMs: number;
  waitedMs: number;
}

const RECENT_MS = 60_000;
const PAUSE_POLL_MS = 10_000;

/**
 * Waits while a shard other than `moving` has a p99 above the bound over the last minute of
 * windows: true when calm, "aborted", or why the run stops (the pause outlasted `maxPauseMs`).
 */
export async function waitForCalm<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  moving: string,
  options: {
    maxP99Ms?: number | undefined;
    maxPauseMs?: number | undefined;
    signal?: AbortSignal | undefined;
    onPause?: ((pause: Pause) => void) | undefined;
  },
  timeoutMs: number,
): Promise<true | "aborted" | string> {
  const bound = options.maxP99Ms!;
  const maxPause = options.maxPauseMs ?? 300_000;
  const started = Date.now();
  for (;;) {
    const { summaries, unanswered } = await sumLoad(registry.databases, RECENT_MS, timeoutMs);
    const hot = summaries
      .filter((s) => s.key !== moving && s.p99 !== undefined && s.p99 > bound)
      .sort((x, y) => y.p99! - x.p99!)[0];
    // A database that does not answer is not calm either: its shards' p99 is unknown.
    const silent = unanswered[0];
    if (!hot && !silent) return true;
    const why = hot
      ? `shard ${hot.key}'s p99 (${hot.p99!.toFixed(1)} ms) is above the bound of ${bound} ms`
      : `${silent!.database} does not answer (${silent!.error}): its shards' p99 is unknown`;
    const waited = Date.now() - started;
    if (waited >= maxPause)
      return `paused ${Math.round(waited / 1000)} s: ${why}; run it again when the load is lower`;
    options.onPause?.({
      shard: hot?.key ?? "",
      p99Ms: hot?.p99 ?? Number.NaN,
      boundMs: bound,
      waitedMs: waited,
      why,
    });
    if (!(await sleep(Math.min(PAUSE_POLL_MS, maxPause - waited), options.signal))) return "aborted";
  }
}

/** Resolves true after `ms`, or false at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
