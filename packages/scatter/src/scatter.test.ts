import { getEventListeners } from "node:events";
import { isShardkitError, ShardkitError } from "@shardkit/id";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ScatterError, ScatterFailedError } from "./errors.js";
import { scatter } from "./scatter.js";

/** A promise that settles when told to, or rejects with the signal's reason when aborted. */
function waitForAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

async function caught(p: Promise<unknown>): Promise<ScatterError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ScatterError);
    return err as ScatterError;
  }
  throw new Error("expected a rejection");
}

afterEach(() => {
  vi.useRealTimers();
});

/** What `running` settles to once the fake clock has moved on `ms`. */
async function afterMs<T>(ms: number, running: Promise<T>): Promise<T> {
  await vi.advanceTimersByTimeAsync(ms);
  return running;
}

describe("scatter: parallelism and the concurrency limit", () => {
  it("starts every call before any finishes when there is no limit, and keeps target order", async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const run = scatter([10, 20, 30, 40], async (t) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await gate;
      inFlight--;
      return [t, t + 1];
    });
    await Promise.resolve();
    expect(inFlight).toBe(4);
    open();
    const result = await run;
    expect(maxInFlight).toBe(4);
    expect(result.values).toEqual([
      [10, 11],
      [20, 21],
      [30, 31],
      [40, 41],
    ]);
    expect(result.complete).toBe(true);
    expect(result.missing).toEqual([]);
    expect(result.rows).toBe(8);
    expect(result.outcomes.map((o) => [o.key, o.status, o.status === "fulfilled" ? o.rows : -1])).toEqual([
      ["0", "fulfilled", 2],
      ["1", "fulfilled", 2],
      ["2", "fulfilled", 2],
      ["3", "fulfilled", 2],
    ]);
    for (const o of result.outcomes) {
      expect(o.startedMs).toBeGreaterThanOrEqual(0);
      expect(o.durationMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("never has more than `concurrency` calls in flight, whatever order they finish in (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
        async (s, n, limit, fails) => {
          let inFlight = 0;
          let maxInFlight = 0;
          const targets = Array.from({ length: n }, (_, i) => i);
          const run = scatter(
            targets,
            async (t) => {
              inFlight++;
              maxInFlight = Math.max(maxInFlight, inFlight);
              try {
                await s.schedule(Promise.resolve(), `target ${t}`);
                if (fails[t]) throw new Error(`boom ${t}`);
                return t * 2;
              } finally {
                inFlight--;
              }
            },
            { concurrency: limit, policy: "partial" },
          );
          await s.waitFor(run);
          const result = await run;
          expect(maxInFlight).toBe(Math.min(limit, n));
          expect(result.values).toEqual(targets.filter((t) => !fails[t]).map((t) => t * 2));
          expect(result.missing.map((m) => m.index)).toEqual(targets.filter((t) => fails[t]));
          expect(result.missing.every((m) => m.reason === "error")).toBe(true);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("refuses a bad concurrency, a bad deadline, an unknown policy and duplicate target names", () => {
    const fn = async () => 1;
    expect(() => scatter([1], fn, { concurrency: 0 })).toThrow(/concurrency/);
    expect(() => scatter([1], fn, { concurrency: 1.5 })).toThrow(/concurrency/);
    expect(() => scatter([1], fn, { deadlineMs: -1 })).toThrow(/deadlineMs/);
    expect(() => scatter([1], fn, { targetTimeoutMs: Number.NaN })).toThrow(/targetTimeoutMs/);
    expect(() => scatter([1], fn, { policy: "best-effort" as never })).toThrow(/policy/);
    expect(() => scatter([1, 2], fn, { key: () => "same" })).toThrow(/both named "same"/);
    expect(() => scatter([1], fn, { abortable: "no" as never })).toThrow(/abortable/);
    try {
      scatter([1], fn, { concurrency: -1 });
    } catch (err) {
      expect(isShardkitError(err, "INVALID_OPTIONS")).toBe(true);
    }
  });

  it("resolves at once with a complete, empty result for no targets", async () => {
    vi.useFakeTimers();
    const result = await scatter([], async () => 1, { deadlineMs: 1000 });
    expect(result).toMatchObject({ values: [], complete: true, missing: [], outcomes: [], rows: 0 });
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("scatter: the partial policy", () => {
  const shards = ["eu", "us", "ap", "sa"];
  const fn = async (shard: string) => {
    if (shard === "us")
      throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5433"), { code: "ECONNREFUSED" });
    if (shard === "sa") throw new Error("relation does not exist");
    return [{ shard }];
  };

  it("'fail' (the default) throws TARGETS_FAILED naming every failed target and keeping each cause", async () => {
    const err = await caught(scatter(shards, fn, { key: (s) => s }));
    expect(err.code).toBe("TARGETS_FAILED");
    expect(err).toBeInstanceOf(ShardkitError);
    expect(isShardkitError(err, "TARGETS_FAILED")).toBe(true);
    expect(err).toBeInstanceOf(ScatterFailedError);
    expect(err.name).toBe("ScatterFailedError");
    expect(err.message).toBe(
      '2 of 4 targets missing: "us" (error: connect ECONNREFUSED 127.0.0.1:5433), "sa" (error: relation does not exist)',
    );
    expect(err.missing.map((m) => [m.key, m.index, m.reason])).toEqual([
      ["us", 1, "error"],
      ["sa", 3, "error"],
    ]);
    expect((err.missing[0]?.error as Error | undefined)?.message).toMatch(/ECONNREFUSED/);
    expect(err.cause).toBeInstanceOf(AggregateError);
    expect((err.cause as AggregateError).errors).toEqual(err.missing.map((m) => m.error));
  });

  it("'partial' returns the values that came back with an explicit list of missing targets and why", async () => {
    const result = await scatter(shards, fn, { key: (s) => s, policy: "partial" });
    expect(result.complete).toBe(false);
    expect(result.values).toEqual([[{ shard: "eu" }], [{ shard: "ap" }]]);
    expect(result.missing.map((m) => [m.target, m.key, m.reason])).toEqual([
      ["us", "us", "error"],
      ["sa", "sa", "error"],
    ]);
    expect(result.outcomes.map((o) => o.status)).toEqual(["fulfilled", "missing", "fulfilled", "missing"]);
    expect(result.rows).toBe(2);
  });

  it("a function that throws synchronously counts as a failed target", async () => {
    const result = await scatter(
      [1, 2],
      (t) => {
        if (t === 2) throw new TypeError("sync");
        return t;
      },
      { policy: "partial" },
    );
    expect(result.values).toEqual([1]);
    expect(result.missing[0]?.error).toBeInstanceOf(TypeError);
    expect(result.outcomes[0]).toMatchObject({ status: "fulfilled", rows: undefined });
  });

  it("failFast with 'fail' cancels the other targets at the first failure", async () => {
    const signals: AbortSignal[] = [];
    const err = await caught(
      scatter(
        ["a", "b", "c", "d"],
        async (t, signal) => {
          signals.push(signal);
          if (t === "b") throw new Error("b is down");
          return waitForAbort(signal);
        },
        { failFast: true, key: (t) => t, concurrency: 3 },
      ),
    );
    expect(err.code).toBe("TARGETS_FAILED");
    expect(err.missing.map((m) => [m.key, m.reason])).toEqual([
      ["a", "cancelled"],
      ["b", "error"],
      ["c", "cancelled"],
      ["d", "cancelled"],
    ]);
    expect(signals).toHaveLength(3); // d never started
    expect(signals.map((s) => s.aborted)).toEqual([true, false, true]);
  });
});

describe("scatter: deadlines, timeouts and cancellation", () => {
  it("a per-target timeout aborts that target's signal and reports it as 'timeout'", async () => {
    vi.useFakeTimers();
    const signals = new Map<string, AbortSignal>();
    const run = scatter(
      ["fast", "slow"],
      (t, signal) => {
        signals.set(t, signal);
        return t === "fast" ? Promise.resolve("ok") : waitForAbort(signal);
      },
      { targetTimeoutMs: 50, policy: "partial", key: (t) => t },
    );
    const result = await afterMs(50, run);
    expect(result.values).toEqual(["ok"]);
    expect(result.missing).toHaveLength(1);
    expect(result.missing[0]).toMatchObject({ key: "slow", reason: "timeout" });
    expect(String(result.missing[0]?.error)).toMatch(/"slow" exceeded its 50 ms timeout/);
    expect(signals.get("slow")?.aborted).toBe(true);
    expect(signals.get("fast")?.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("with 'fail', a timed-out target is named in TARGETS_FAILED", async () => {
    vi.useFakeTimers();
    const run = caught(
      scatter([1, 2, 3], (t, signal) => (t === 2 ? waitForAbort(signal) : t), {
        targetTimeoutMs: 20,
        key: (t) => `shard-${t}`,
      }),
    );
    const err = await afterMs(20, run);
    expect(err.code).toBe("TARGETS_FAILED");
    expect(err.message).toBe('1 of 3 targets missing: "shard-2" (timeout)');
  });

  it("the whole-scatter deadline aborts running targets and skips waiting ones", async () => {
    vi.useFakeTimers();
    const started: number[] = [];
    const signals: AbortSignal[] = [];
    const fn = (t: number, signal: AbortSignal) => {
      started.push(t);
      signals.push(signal);
      return t === 0 ? Promise.resolve("first") : waitForAbort(signal);
    };
    const run = scatter([0, 1, 2, 3], fn, { concurrency: 2, deadlineMs: 100, policy: "partial" });
    const result = await afterMs(100, run);
    expect(started).toEqual([0, 1, 2]);
    expect(result.values).toEqual(["first"]);
    expect(result.missing.map((m) => [m.index, m.reason])).toEqual([
      [1, "deadline"],
      [2, "deadline"],
      [3, "deadline"],
    ]);
    expect(signals.map((s) => s.aborted)).toEqual([false, true, true]);
    const skipped = result.outcomes[3];
    expect(skipped).toMatchObject({ status: "missing", startedMs: null, durationMs: null });
    expect(vi.getTimerCount()).toBe(0);

    const again = caught(scatter([0, 1, 2, 3], fn, { concurrency: 2, deadlineMs: 100 }));
    const err = await afterMs(100, again);
    expect(err.code).toBe("DEADLINE_EXCEEDED");
    expect(err.message).toBe('3 of 4 targets missing: "1" (deadline), "2" (deadline), "3" (deadline)');
  });

  it("a target that ignores its signal does not hold the scatter past its deadline", async () => {
    vi.useFakeTimers();
    const run = scatter([1], () => new Promise<never>(() => {}), { deadlineMs: 30, policy: "partial" });
    const result = await afterMs(30, run);
    expect(result.missing[0]?.reason).toBe("deadline");
  });

  it("the caller's signal aborts every target and throws ABORTED whatever the policy, leaving no listener", async () => {
    const controller = new AbortController();
    const signals: AbortSignal[] = [];
    const run = caught(
      scatter(
        ["a", "b", "c"],
        (t, signal) => {
          signals.push(signal);
          return t === "a" ? "done" : waitForAbort(signal);
        },
        {
          signal: controller.signal,
          policy: "partial",
          key: (t) => t,
          deadlineMs: 60_000,
          targetTimeoutMs: 60_000,
        },
      ),
    );
    await Promise.resolve();
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    controller.abort(new Error("user went away"));
    const err = await run;
    expect(err.code).toBe("ABORTED");
    expect((err.cause as Error).message).toBe("user went away");
    expect(err.missing.map((m) => [m.key, m.reason])).toEqual([
      ["b", "aborted"],
      ["c", "aborted"],
    ]);
    expect(signals.map((s) => s.aborted)).toEqual([false, true, true]);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("an already-aborted signal rejects without calling anything", async () => {
    const fn = vi.fn(async () => 1);
    const err = await caught(scatter([1, 2], fn, { signal: AbortSignal.abort() }));
    expect(err.code).toBe("ABORTED");
    expect(fn).not.toHaveBeenCalled();
  });

  it("leaves no timer and no listener behind after success, failure and timeout (1,000 runs)", async () => {
    const controller = new AbortController();
    vi.useFakeTimers();
    for (let i = 0; i < 1000; i++) {
      const run = scatter(
        [0, 1, 2],
        (t, signal) =>
          t === 2 && i % 3 === 0
            ? waitForAbort(signal)
            : t === 1 && i % 2
              ? Promise.reject(new Error("x"))
              : t,
        {
          signal: controller.signal,
          deadlineMs: 1000,
          targetTimeoutMs: 10,
          policy: "partial",
          concurrency: 2,
        },
      );
      await vi.advanceTimersByTimeAsync(i % 3 === 0 ? 10 : 0);
      await run;
      expect(vi.getTimerCount()).toBe(0);
    }
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });
});

describe("scatter: calls that cannot be cancelled (abortable: false)", () => {
  it("gives every call one signal that never aborts, and still reports stopped calls missing at once", async () => {
    vi.useFakeTimers();
    const signals: AbortSignal[] = [];
    let late!: (value: string) => void;
    const run = scatter(
      ["fast", "slow", "waiting"],
      (t, signal) => {
        signals.push(signal);
        if (t === "fast") return "ok";
        return new Promise<string>((resolve) => {
          if (t === "slow") late = resolve;
        });
      },
      { abortable: false, concurrency: 2, deadlineMs: 100, policy: "partial", key: (t) => t },
    );
    const result = await afterMs(100, run);
    expect(result.values).toEqual(["ok"]);
    expect(result.missing.map((m) => [m.key, m.reason])).toEqual([
      ["slow", "deadline"],
      ["waiting", "deadline"],
    ]);
    expect(signals).toHaveLength(3);
    expect(new Set(signals).size).toBe(1);
    expect(signals[0]?.aborted).toBe(false);
    // The slow call answers after the scatter gave up on it: ignored.
    late("too late");
    await Promise.resolve();
    expect(result.outcomes[1]).toMatchObject({ status: "missing", reason: "deadline" });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("per-target timeouts and failFast report as with signals", async () => {
    vi.useFakeTimers();
    const hang = () => new Promise<never>(() => {});
    const timed = scatter([1, 2], (t) => (t === 2 ? hang() : t), {
      abortable: false,
      targetTimeoutMs: 20,
      policy: "partial",
    });
    const result = await afterMs(20, timed);
    expect(result.values).toEqual([1]);
    expect(result.missing.map((m) => [m.index, m.reason])).toEqual([[1, "timeout"]]);
    const err = await caught(
      scatter(["a", "b"], (t) => (t === "b" ? Promise.reject(new Error("b is down")) : hang()), {
        abortable: false,
        failFast: true,
        key: (t) => t,
      }),
    );
    expect(err.missing.map((m) => [m.key, m.reason])).toEqual([
      ["a", "cancelled"],
      ["b", "error"],
    ]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
