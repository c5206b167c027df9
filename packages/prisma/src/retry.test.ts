import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoff, retry } from "./retry.js";

// The clock is the test's: waits pass when it says so, whatever the machine's speed.
beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "performance"] }));
afterEach(() => vi.useRealTimers());

class Lost extends Error {}
const lost = (error: unknown) => error instanceof Lost;

/** Runs `retry` to its end with the clock advanced as far as it waits; the attempts it made and how. */
async function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const outcome = promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  await vi.runAllTimersAsync();
  return outcome;
}

describe("retry", () => {
  it("runs again after a retryable failure, until it succeeds", async () => {
    const attempts: number[] = [];
    const { value } = await settle(
      retry(
        async (attempt) => {
          attempts.push(attempt);
          if (attempt < 2) throw new Lost();
          return "done";
        },
        { retries: 5, retryable: lost },
      ),
    );
    expect(value).toBe("done");
    expect(attempts).toEqual([0, 1, 2]);
  });

  it("throws a failure that is not retryable at once, and the last one when the retries are spent", async () => {
    let runs = 0;
    const other = new Error("constraint");
    const first = await settle(
      retry(
        async () => {
          runs++;
          throw other;
        },
        { retries: 5, retryable: lost },
      ),
    );
    expect(first.error).toBe(other);
    expect(runs).toBe(1);
    runs = 0;
    const spent = await settle(
      retry(
        async () => {
          runs++;
          throw new Lost(`run ${runs}`);
        },
        { retries: 3, retryable: lost },
      ),
    );
    expect((spent.error as Error).message).toBe("run 4");
    expect(runs).toBe(4);
  });

  it("starts no attempt past its deadline", async () => {
    let runs = 0;
    const until = performance.now() + 100;
    const { error } = await settle(
      retry(
        async () => {
          runs++;
          throw new Lost();
        },
        { retries: 1_000, retryable: lost, baseMs: 10, maxMs: 40, until },
      ),
    );
    expect(error).toBeInstanceOf(Lost);
    expect(performance.now()).toBeLessThanOrEqual(until);
    // Waits of 10, 20, 40, 40 ... ms (each times 0.5 to 1.5): a handful of attempts fit in 100 ms.
    expect(runs).toBeGreaterThan(1);
    expect(runs).toBeLessThan(20);
  });

  it("waits twice as long each time, up to its longest wait, with jitter of half either way", () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const nominal = Math.min(500, 10 * 2 ** attempt);
      const wait = backoff(attempt);
      expect(wait).toBeGreaterThanOrEqual(nominal * 0.5);
      expect(wait).toBeLessThan(nominal * 1.5);
    }
    expect(backoff(3, { baseMs: 1, maxMs: 4 })).toBeLessThan(6);
  });
});
