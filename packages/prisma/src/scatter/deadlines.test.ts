import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LegDeadlines } from "./deadlines.js";

// The legs of one scatter, each bounded by the same timeout from its own start, with one timer:
// fake timers and a fake clock move time by hand.
beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
afterEach(() => vi.useRealTimers());

/** A statement that answers (or fails) when told to. */
function statement<T>() {
  let answer!: (value: T) => void;
  let fail!: (error: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => {
    answer = resolve;
    fail = reject;
  });
  return { promise, answer, fail };
}

function deadlines(timeoutMs = 100) {
  const failed: unknown[] = [];
  const legs = new LegDeadlines(
    timeoutMs,
    (database) => new Error(`database #${database} did not answer within ${timeoutMs} ms`),
    (error) => failed.push(error),
  );
  return { legs, failed };
}

/** Follows `promise` from the start: `now()` is its value, its error's message, or "pending". */
function follow(promise: Promise<unknown>) {
  let out: unknown = "pending";
  promise.then(
    (value) => {
      out = value;
    },
    (error: Error) => {
      out = error.message;
    },
  );
  return {
    async now() {
      await vi.advanceTimersByTimeAsync(0);
      return out;
    },
  };
}

describe("LegDeadlines", () => {
  it("legs that answer in time pass their answers on, and leave no timer", async () => {
    const { legs, failed } = deadlines();
    const a = statement<number>();
    const b = statement<number>();
    const ra = legs.run(0, () => a.promise);
    const rb = legs.run(1, () => b.promise);
    expect(vi.getTimerCount()).toBe(1); // one timer for every leg
    a.answer(1);
    b.answer(2);
    expect(await Promise.all([ra, rb])).toEqual([1, 2]);
    expect(vi.getTimerCount()).toBe(0);
    expect(failed).toEqual([]);
  });

  it("a leg past its timeout fails with its database's error; the others go on; its late answer is ignored", async () => {
    const { legs, failed } = deadlines();
    const slow = statement<string>();
    const fast = statement<string>();
    const rs = follow(legs.run(3, () => slow.promise));
    const rf = follow(legs.run(4, () => fast.promise));
    await vi.advanceTimersByTimeAsync(50);
    fast.answer("fast");
    expect(await rf.now()).toBe("fast");
    expect(await rs.now()).toBe("pending");
    await vi.advanceTimersByTimeAsync(50);
    expect(await rs.now()).toBe("database #3 did not answer within 100 ms");
    slow.answer("too late");
    slow.fail(new Error("later still"));
    expect(await rs.now()).toBe("database #3 did not answer within 100 ms");
    expect(failed).toEqual([]); // the deadline's own error is not a leg's failure
    expect(vi.getTimerCount()).toBe(0);
  });

  it("each leg gets its whole timeout from its own start (legs started later, as with a concurrency limit)", async () => {
    const { legs } = deadlines();
    const first = follow(legs.run(0, () => statement().promise));
    await vi.advanceTimersByTimeAsync(60);
    const second = follow(legs.run(1, () => statement().promise));
    await vi.advanceTimersByTimeAsync(40);
    expect(await first.now()).toMatch(/#0 did not answer/);
    expect(await second.now()).toBe("pending");
    await vi.advanceTimersByTimeAsync(59);
    expect(await second.now()).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await second.now()).toMatch(/#1 did not answer/);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a leg's own error, thrown or rejected before its deadline, fails it and is told", async () => {
    const { legs, failed } = deadlines();
    const refused = new Error("refused");
    const bad = statement<never>();
    const rb = legs.run(0, () => bad.promise);
    const thrown = legs.run(1, () => {
      throw refused;
    });
    bad.fail(refused);
    await expect(rb).rejects.toBe(refused);
    await expect(thrown).rejects.toBe(refused);
    expect(failed).toEqual([refused, refused]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a timeout past what a timer holds sets no deadline", async () => {
    const { legs, failed } = deadlines(Number.POSITIVE_INFINITY);
    const s = statement<number>();
    const r = legs.run(0, () => s.promise);
    expect(vi.getTimerCount()).toBe(0);
    s.answer(7);
    expect(await r).toBe(7);
    await expect(legs.run(0, () => Promise.reject(new Error("x")))).rejects.toThrow("x");
    expect(failed).toHaveLength(1);
  });
});
