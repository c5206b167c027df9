import type { ShardIdentifier } from "@shardkit/id";
import { RoutingOptionsError, ShardTimeoutError } from "./errors.js";

/**
 * `run()`, or `ShardTimeoutError` naming `shard` once `timeoutMs` pass first: a database that hangs
 * (its server frozen, its disk stalled) fails its own call in bounded time instead of never. The
 * call itself cannot be cancelled and may still finish later: give writes an idempotency key so a
 * retry finds what a late commit recorded. `isShardUnavailable` counts the timeout as unavailable.
 */
export async function withShardDeadline<T>(
  shard: ShardIdentifier,
  timeoutMs: number,
  run: () => PromiseLike<T>,
): Promise<T> {
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RoutingOptionsError([
      `withShardDeadline: timeoutMs must be a positive number, got ${timeoutMs}`,
    ]);
  }
  return withDeadline(timeoutMs, () => new ShardTimeoutError(shard, timeoutMs), run);
}

/**
 * `run(signal)`, or the error `late()` makes once `timeoutMs` pass first. `signal` aborts at that
 * moment, with that error as its reason, for a `run` that can stop (a fetch, a delivery); a
 * statement sent to a database cannot be taken back and goes on. The timer is armed after `run()`
 * has started and cleared as soon as either settles; it never keeps a process alive past its
 * answer. A `timeoutMs` past what a timer holds (about 24.8 days; `Infinity`) sets no deadline.
 * The one deadline of the packages: `orAfter` is its form for waits that give up quietly.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  late: () => unknown,
  run: (signal: AbortSignal) => PromiseLike<T>,
): Promise<T> {
  const controller = new AbortController();
  const running = Promise.resolve(run(controller.signal)); // a synchronous throw leaves no timer behind
  // Past what a timer can hold (about 24.8 days; Infinity), Node would fire at once: no deadline.
  if (!(timeoutMs < 2 ** 31)) return running;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = late();
      controller.abort(error);
      reject(error);
    }, timeoutMs);
  });
  running.catch(() => {}); // a late failure after the deadline has nobody to tell
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `run(signal)`'s answer, or `fallback` once `timeoutMs` pass first (a wait that gives up quietly:
 * stopping a relay, settling a journal line). `run`'s own failure is thrown as it is.
 */
export async function orAfter<T, F>(
  timeoutMs: number,
  fallback: F,
  run: (signal: AbortSignal) => PromiseLike<T>,
): Promise<T | F> {
  // What the deadline rejects with here: a mark of this call's own, never seen outside it.
  const late = Symbol("late");
  try {
    return await withDeadline(timeoutMs, () => late, run);
  } catch (error) {
    if (error === late) return fallback;
    throw error;
  }
}
