import type { ShardIdentifier } from "@shardkit/id";
import { RoutingOptionsError, type ShardRoutingError, ShardTimeoutError } from "./errors.js";

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

/** `run()`, or the error `late()` makes once `timeoutMs` pass first (the call itself goes on). */
export async function withDeadline<T>(
  timeoutMs: number,
  late: () => ShardRoutingError,
  run: () => PromiseLike<T>,
): Promise<T> {
  const running = Promise.resolve(run()); // a synchronous throw leaves no timer behind
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

/**
 * Deadlines for many calls with one timer, for the routed client's hot path: a call costs a set
 * insertion and removal, not a timer of its own. The timer ticks only while a call is pending
 * (never when idle), every `tickMs`, and fails the calls past due; a deadline fires up to `tickMs`
 * late. It never keeps a process alive.
 */
export class Deadlines {
  private readonly pending = new Set<{ due: number; fail: () => void }>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly tickMs: number) {}

  /** `run()`, or the error `late()` makes once `timeoutMs` pass first (the call itself goes on). */
  run<T>(timeoutMs: number, late: () => Error, run: () => PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = { due: performance.now() + timeoutMs, fail: () => reject(late()) };
      this.pending.add(entry);
      this.timer ??= this.arm();
      const done = () => this.pending.delete(entry);
      try {
        run().then(
          (value) => {
            done();
            resolve(value);
          },
          (error: unknown) => {
            done();
            reject(error);
          },
        );
      } catch (error) {
        done();
        reject(error);
      }
    });
  }

  private arm(): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.timer = undefined;
      const now = performance.now();
      for (const entry of this.pending) {
        if (entry.due > now) continue;
        this.pending.delete(entry);
        try {
          entry.fail();
        } catch {
          // the error could not be made; the call goes on waiting for its own answer
        }
      }
      if (this.pending.size > 0) this.timer = this.arm();
    }, this.tickMs);
    timer.unref?.();
    return timer;
  }
}
