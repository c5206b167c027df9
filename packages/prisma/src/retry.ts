// One way to try again after a failure that may pass (a lost race, a deadlock, a lock given way):
// a limited number of times, each wait twice the last (with jitter, so that the losers of one race
// step apart), never starting an attempt past a deadline.

/** How `retry` tries again. */
export interface RetryOptions {
  /** How many times to run again after the first failure. */
  retries: number;
  /** Whether a failure may pass if tried again; any other is thrown at once. */
  retryable(error: unknown): boolean;
  /** The first wait (ms); each next one is twice the last, up to `maxMs`. Default 10. */
  baseMs?: number;
  /** The longest wait (ms). Default 500. */
  maxMs?: number;
  /**
   * No attempt starts after this time (`performance.now()` clock): a failure whose wait would end
   * past it is thrown as it is. Default: none.
   */
  until?: number;
}

/** Runs `run` (given the attempt, from 0) until it succeeds, a failure is not retryable, or the retries or time run out. */
export async function retry<T>(run: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run(attempt);
    } catch (error) {
      if (attempt >= options.retries || !options.retryable(error)) throw error;
      const wait = backoff(attempt, options);
      if (options.until !== undefined && performance.now() + wait >= options.until) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** The wait before attempt `attempt + 1`: `baseMs * 2^attempt`, at most `maxMs`, times a jitter of 0.5 to 1.5. */
export function backoff(attempt: number, options: Pick<RetryOptions, "baseMs" | "maxMs"> = {}): number {
  const { baseMs = 10, maxMs = 500 } = options;
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30)) * (0.5 + Math.random());
}
