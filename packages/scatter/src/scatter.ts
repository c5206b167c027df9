import {
  describeError,
  InvalidScatterOptionsError,
  type MissingReason,
  type MissingTarget,
  ScatterAbortedError,
  ScatterDeadlineError,
  ScatterFailedError,
} from "./errors.js";

/** `'fail'` (default): any missing target makes the scatter throw. `'partial'`: return what answered, and say what is missing. */
export type PartialPolicy = "fail" | "partial";

/** Options of {@link scatter}. Every option is optional. */
export interface ScatterOptions<Target, Value> {
  /** What to do when a target fails or times out. Default `'fail'`. */
  policy?: PartialPolicy;
  /** Most calls in flight at once (a positive integer). Default: all targets at once. */
  concurrency?: number;
  /** Deadline of the whole scatter in ms: when it expires every running target is aborted and every waiting one is skipped. */
  deadlineMs?: number;
  /** Timeout of each call in ms, counted from its start (waiting for a concurrency slot does not count). */
  targetTimeoutMs?: number;
  /** The caller's signal: aborting it aborts every running target and makes the scatter throw `ABORTED`, whatever the policy. */
  signal?: AbortSignal;
  /** Names a target in results and errors (default: its index). Names must be unique. */
  key?: (target: Target, index: number) => string;
  /** Row count of a value for the result (default: an array's length, or the length of a `rows` array property). */
  rows?: (value: Value) => number | undefined;
  /** With policy `'fail'`: at the first failure, abort the other targets (reported as `'cancelled'`) instead of waiting for them. */
  failFast?: boolean;
  /**
   * Default true: each call gets its own AbortSignal. `false` for calls that cannot be cancelled
   * (a Prisma query, once sent, runs to its end): no signal is made per call (making one is most
   * of the scatter's own cost per target) and every call gets one that never aborts. A call
   * stopped by its timeout, the deadline, the caller's signal or `failFast` is still reported
   * missing at once, and its late answer is ignored.
   */
  abortable?: boolean;
}

/** The signal of the calls of a scatter with `abortable: false`: it never aborts. */
const NEVER_ABORTED = new AbortController().signal;

/** What happened to one target. Times are in ms; `startedMs` is relative to the start of the scatter. */
export type TargetOutcome<Target, Value> =
  | {
      readonly status: "fulfilled";
      readonly target: Target;
      readonly key: string;
      readonly index: number;
      readonly value: Value;
      readonly rows: number | undefined;
      readonly startedMs: number;
      readonly durationMs: number;
    }
  | (MissingTarget<Target> & {
      readonly status: "missing";
      /** null when the target was never started (deadline, abort or failFast before its turn) */
      readonly startedMs: number | null;
      readonly durationMs: number | null;
    });

/** The result of a scatter that did not throw. */
export interface ScatterResult<Target, Value> {
  /** Values of the targets that answered, in target order. */
  readonly values: Value[];
  /** True when every target answered: `missing` is empty. */
  readonly complete: boolean;
  /** Targets with no value and why (only ever non-empty with policy `'partial'`). */
  readonly missing: MissingTarget<Target>[];
  /** One outcome per target, in target order, with timing and row counts. */
  readonly outcomes: TargetOutcome<Target, Value>[];
  /** Sum of the counted rows of the answered targets. */
  readonly rows: number;
  /** Wall time of the whole scatter in ms. */
  readonly durationMs: number;
}

/**
 * Calls `fn` once per target, in parallel (at most `concurrency` at a time), and gathers the
 * results. Each call gets an AbortSignal that fires when its timeout, the scatter's deadline, the
 * caller's signal or `failFast` stops it: the function should pass it on (e.g. cancel its query),
 * because the scatter settles at once and does not wait for a call it has given up on.
 *
 * With policy `'fail'` (default) a scatter with any failed, timed-out or skipped target throws a
 * {@link ScatterFailedError} (`TARGETS_FAILED`), or a {@link ScatterDeadlineError}
 * (`DEADLINE_EXCEEDED`) when the deadline expired, that lists every one of them in `missing`.
 * With `'partial'` it resolves with `complete: false` and `missing`. The caller's signal makes it
 * throw a {@link ScatterAbortedError} (`ABORTED`), whatever the policy.
 * No timer or listener outlives the call.
 * Longer than 80 lines: one closure, so that every timer and listener of a call ends with it.
 */
export function scatter<Target, Value>(
  targets: Iterable<Target>,
  fn: (target: Target, signal: AbortSignal) => Value | PromiseLike<Value>,
  options: ScatterOptions<Target, Value> = {},
): Promise<ScatterResult<Target, Value>> {
  const list = Array.from(targets);
  const n = list.length;
  const policy = options.policy ?? "fail";
  const limit = options.concurrency ?? Number.POSITIVE_INFINITY;
  validate(options, policy, limit);
  const keys = list.map((t, i) => (options.key ? options.key(t, i) : String(i)));
  const seen = new Set<string>();
  for (const k of keys) {
    if (typeof k !== "string") throw new InvalidScatterOptionsError("key() must return a string");
    if (seen.has(k)) throw new InvalidScatterOptionsError(`two targets are both named ${JSON.stringify(k)}`);
    seen.add(k);
  }
  const callerSignal = options.signal;
  if (callerSignal?.aborted) {
    return Promise.reject(
      new ScatterAbortedError("scatter aborted by the caller before it started", {
        cause: callerSignal.reason,
      }),
    );
  }
  const countRows = options.rows ?? defaultRows;
  const t0 = performance.now();
  const since = () => performance.now() - t0;

  const abortable = options.abortable ?? true;

  // Longer than 80 lines: the call's slots, timers and listeners, settled in one place.
  return new Promise((resolve, reject) => {
    const outcomes: (TargetOutcome<Target, Value> | undefined)[] = new Array(n);
    // The running calls by index (a sparse array: cheaper than a Map at one entry per target).
    const inflight: (Slot | undefined)[] = new Array(n);
    let running = 0;
    let next = 0;
    let settled = 0;
    let stop: { reason: MissingReason; error: unknown } | null = null;
    let done = false;
    let deadlineTimer: ReturnType<typeof setTimeout> | undefined;

    const onCallerAbort = () =>
      stopAll(
        "aborted",
        new ScatterAbortedError("scatter aborted by the caller", { cause: callerSignal?.reason }),
      );

    /** Which target an outcome is of: the target, its key and its index. */
    const targetAt = (i: number) => ({ target: list[i] as Target, key: keys[i] as string, index: i });
    const missingOutcome = (
      i: number,
      reason: MissingReason,
      error: unknown,
      startedMs: number | null,
    ): TargetOutcome<Target, Value> => ({
      status: "missing",
      ...targetAt(i),
      reason,
      error,
      startedMs,
      durationMs: startedMs === null ? null : since() - startedMs,
    });

    function settle(i: number, outcome: TargetOutcome<Target, Value>): void {
      if (outcomes[i] !== undefined) return;
      outcomes[i] = outcome;
      settled++;
      const slot = inflight[i];
      if (slot) {
        if (slot.timer !== undefined) clearTimeout(slot.timer);
        inflight[i] = undefined;
        running--;
      }
      if (
        outcome.status === "missing" &&
        options.failFast &&
        policy === "fail" &&
        stop === null &&
        (outcome.reason === "error" || outcome.reason === "timeout")
      ) {
        stopAll(
          "cancelled",
          new ScatterFailedError(`cancelled: target ${JSON.stringify(outcome.key)} failed first`),
        );
        return;
      }
      if (settled === n) finish();
      else launch();
    }

    function launch(): void {
      while (stop === null && running < limit && next < n) start(next++);
    }

    function start(i: number): void {
      const controller = abortable ? new AbortController() : undefined;
      const startedMs = since();
      const slot: Slot = { controller, startedMs, timer: undefined };
      inflight[i] = slot;
      running++;
      const timeout = options.targetTimeoutMs;
      if (timeout !== undefined) {
        slot.timer = setTimeout(() => {
          const error = new ScatterDeadlineError(
            `target ${JSON.stringify(keys[i])} exceeded its ${timeout} ms timeout`,
          );
          controller?.abort(error);
          settle(i, missingOutcome(i, "timeout", error, startedMs));
        }, timeout);
      }
      let pending: PromiseLike<Value>;
      try {
        pending = Promise.resolve(fn(list[i] as Target, controller ? controller.signal : NEVER_ABORTED));
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (value) => {
          if (outcomes[i] !== undefined) return; // given up on: its late answer is ignored
          const durationMs = since() - startedMs;
          let rows: number | undefined;
          try {
            rows = countRows(value);
          } catch (error) {
            settle(i, missingOutcome(i, "error", error, startedMs));
            return;
          }
          settle(i, { status: "fulfilled", ...targetAt(i), value, rows, startedMs, durationMs });
        },
        (error: unknown) => settle(i, missingOutcome(i, "error", error, startedMs)),
      );
    }

    function stopAll(reason: MissingReason, error: unknown): void {
      if (done || stop !== null) return;
      stop = { reason, error };
      // Record every stopped target before aborting: an abort listener may settle synchronously.
      const stopped: Slot[] = [];
      for (let i = 0; i < next; i++) {
        const slot = inflight[i];
        if (slot === undefined) continue;
        inflight[i] = undefined;
        stopped.push(slot);
        if (slot.timer !== undefined) clearTimeout(slot.timer);
        if (outcomes[i] === undefined) {
          outcomes[i] = missingOutcome(i, reason, error, slot.startedMs);
          settled++;
        }
      }
      running = 0;
      for (; next < n; next++) {
        outcomes[next] = missingOutcome(next, reason, error, null);
        settled++;
      }
      for (const slot of stopped) slot.controller?.abort(error);
      finish();
    }

    function finish(): void {
      if (done) return;
      done = true;
      if (deadlineTimer !== undefined) clearTimeout(deadlineTimer);
      callerSignal?.removeEventListener("abort", onCallerAbort);
      const all = outcomes as TargetOutcome<Target, Value>[];
      const values: Value[] = [];
      const missing: MissingTarget<Target>[] = [];
      let rows = 0;
      for (const o of all) {
        if (o.status === "fulfilled") {
          values.push(o.value);
          rows += o.rows ?? 0;
        } else {
          missing.push({ target: o.target, key: o.key, index: o.index, reason: o.reason, error: o.error });
        }
      }
      if (stop?.reason === "aborted") {
        reject(
          new ScatterAbortedError(
            `scatter aborted by the caller; ${missing.length} of ${n} targets missing: ${describeMissing(missing)}`,
            { cause: (stop.error as ScatterAbortedError).cause, missing },
          ),
        );
        return;
      }
      if (missing.length > 0 && policy === "fail") {
        const message = `${missing.length} of ${n} targets missing: ${describeMissing(missing)}`;
        const details = {
          cause: new AggregateError(
            missing.map((m) => m.error),
            "errors of the missing targets",
          ),
          missing,
        };
        reject(
          stop?.reason === "deadline"
            ? new ScatterDeadlineError(message, details)
            : new ScatterFailedError(message, details),
        );
        return;
      }
      resolve({ values, complete: missing.length === 0, missing, outcomes: all, rows, durationMs: since() });
    }

    if (n === 0) {
      finish();
      return;
    }
    callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
    if (options.deadlineMs !== undefined) {
      const ms = options.deadlineMs;
      deadlineTimer = setTimeout(
        () => stopAll("deadline", new ScatterDeadlineError(`scatter deadline of ${ms} ms exceeded`)),
        ms,
      );
    }
    launch();
  });
}

interface Slot {
  /** Absent with `abortable: false`. */
  readonly controller: AbortController | undefined;
  readonly startedMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

function validate<T, V>(options: ScatterOptions<T, V>, policy: unknown, limit: number): void {
  if (policy !== "fail" && policy !== "partial")
    throw new InvalidScatterOptionsError(`policy must be 'fail' or 'partial', got ${String(policy)}`);
  if (!(limit === Number.POSITIVE_INFINITY || (Number.isInteger(limit) && limit >= 1)))
    throw new InvalidScatterOptionsError(`concurrency must be a positive integer, got ${String(limit)}`);
  if (options.abortable !== undefined && typeof options.abortable !== "boolean")
    throw new InvalidScatterOptionsError(`abortable must be a boolean, got ${String(options.abortable)}`);
  for (const name of ["deadlineMs", "targetTimeoutMs"] as const) {
    const v = options[name];
    if (v !== undefined && !(typeof v === "number" && Number.isFinite(v) && v >= 0))
      throw new InvalidScatterOptionsError(`${name} must be a finite number >= 0, got ${String(v)}`);
  }
}

function defaultRows(value: unknown): number | undefined {
  if (Array.isArray(value)) return value.length;
  if (typeof value === "object" && value !== null) {
    const rows = (value as { rows?: unknown }).rows;
    if (Array.isArray(rows)) return rows.length;
  }
  return undefined;
}

function describeMissing(missing: readonly MissingTarget[]): string {
  return missing
    .map(
      (m) =>
        `${JSON.stringify(m.key)} (${m.reason}${m.reason === "error" ? `: ${describeError(m.error)}` : ""})`,
    )
    .join(", ");
}
