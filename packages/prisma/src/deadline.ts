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
 * `run()`, or the error `late()` makes once `timeoutMs` pass first (the call itself goes on: a
 * statement cannot be taken back once sent). The timer is armed after `run()` has started and
 * cleared as soon as either settles; it never keeps a process alive past its answer. A `timeoutMs`
 * past what a timer holds (about 24.8 days; `Infinity`) sets no deadline.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  late: () => Error,
  run: () => PromiseLike<T>,
): Promise<T> {
  const running = Promise.resolve(run()); // a synchronous throw leaves no timer behind
  // Past what a timer can hold (about 24.8 days; Infinity), Node would fire at once: no deadline.
  if (!(timeoutMs < 2 ** 31)) return running;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), timeoutMs);
  });
  running.catch(() => {}); // a late failure after the deadline has nobody to tell
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
