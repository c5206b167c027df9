// The deadline of each statement of a scatter (its legs), with one timer for all of them.

/** One leg waiting on its database. */
interface Leg {
  database: number;
  /** When its deadline passes (`performance.now()` time). */
  at: number;
  settled: boolean;
  reject: (error: unknown) => void;
}

/**
 * Bounds each leg of one scatter by the same `timeoutMs`, counted from the leg's start, as
 * `withDeadline` bounds one statement: past it, the leg fails with `late(database)` (the
 * statement itself goes on: it cannot be taken back). One timeout for every leg means deadlines
 * come in the order the legs start, so one timer, armed for the oldest unsettled leg, serves them
 * all, where a timer and three promises per leg cost as much as the rest of shardkit's work on it.
 * A leg that settles leaves the timer to the next one; no timer outlives the last leg. A
 * `timeoutMs` past what a timer holds (about 24.8 days; Infinity) sets no deadline.
 */
export class LegDeadlines {
  /** Legs in start order, which is deadline order; those before `head` are done with. */
  private legs: Leg[] = [];
  private head = 0;
  private pending = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private armedFor: Leg | undefined;

  constructor(
    private readonly timeoutMs: number,
    /** The error of a leg on `database` that did not answer in time. */
    private readonly late: (database: number) => Error,
    /** Told the error of each leg that fails before its deadline (not the deadline's own). */
    private readonly failed: (error: unknown) => void,
  ) {}

  /** `run()`, a statement on `database`, or `late(database)` once `timeoutMs` pass first. */
  run<T>(database: number, run: () => PromiseLike<T>): Promise<T> {
    if (!(this.timeoutMs < 2 ** 31)) {
      try {
        return Promise.resolve(run()).catch((error: unknown) => {
          this.failed(error);
          throw error;
        });
      } catch (error) {
        this.failed(error);
        return Promise.reject(error);
      }
    }
    return new Promise<T>((resolve, reject) => {
      let running: PromiseLike<T>;
      try {
        running = run();
      } catch (error) {
        this.failed(error);
        reject(error);
        return;
      }
      const leg: Leg = { database, at: performance.now() + this.timeoutMs, settled: false, reject };
      this.legs.push(leg);
      this.pending++;
      if (this.timer === undefined) this.arm(leg, this.timeoutMs);
      running.then(
        (value) => {
          if (this.settle(leg)) resolve(value);
        },
        (error: unknown) => {
          if (!this.settle(leg)) return;
          this.failed(error);
          reject(error);
        },
      );
    });
  }

  /** Whether `leg` was still waiting; a leg failed by its deadline has nobody to tell of its answer. */
  private settle(leg: Leg): boolean {
    if (leg.settled) return false;
    leg.settled = true;
    if (--this.pending === 0) this.clear();
    return true;
  }

  /** Arms the timer for `leg`, the oldest unsettled one. */
  private arm(leg: Leg, ms: number): void {
    this.armedFor = leg;
    this.timer = setTimeout(() => this.expire(), ms);
  }

  /**
   * The timer fired: the leg it was armed for fails (even if the clock reads a hair early), and so
   * does every later leg whose deadline has passed too; the timer is armed for the next one.
   */
  private expire(): void {
    this.timer = undefined;
    const now = performance.now();
    while (this.head < this.legs.length) {
      const leg = this.legs[this.head]!;
      if (!leg.settled) {
        if (leg !== this.armedFor && leg.at > now) {
          this.arm(leg, Math.max(0, leg.at - now));
          return;
        }
        leg.settled = true;
        this.pending--;
        leg.reject(this.late(leg.database));
      }
      this.head++;
    }
    this.clear();
  }

  private clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = undefined;
    this.legs = [];
    this.head = 0;
  }
}
