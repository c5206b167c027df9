// Turns: how the outbox relay bounds its work for the whole fleet rather than per database. A
// `Turns` hands out at most `size` turns at once, first come first served: polls take one each
// (`pollConcurrency`), deliveries take one each (`deliveryConcurrency`).

/** A turn taken from `Turns`: give it back with `release()` (once; again does nothing). */
export interface Turn {
  release(): void;
  /** The holder moved on (a statement answered, a delivery ended): its stall timer starts again. */
  progress(): void;
}

/**
 * At most `size` turns at once, granted in the order they were asked for. A relay's databases each
 * ask for one poll's turn at a time, so a database that is due waits for at most one poll of each
 * other database before its own, however large their backlogs: no database is starved.
 */
export class Turns {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    this.#free = size;
  }

  /**
   * Waits for a turn. With `stallMs`, a holder that makes no `progress()` for that long gives its
   * turn to the next in line and goes on without one: a poll stuck on a frozen server (until its
   * `queryTimeoutMs`) or on one hung delivery (until its `deliveryTimeoutMs`) holds nobody else up.
   */
  async take(stallMs?: number): Promise<Turn> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let held = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const release = () => {
      if (!held) return;
      held = false;
      clearTimeout(timer);
      // Handed straight to the next in line: nobody who asked later can take it first.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    };
    const progress = () => {
      // Past what a timer holds (about 24.8 days; Infinity), Node would fire at once: no stall.
      if (!held || !(stallMs !== undefined && stallMs < 2 ** 31)) return;
      clearTimeout(timer);
      timer = setTimeout(release, stallMs);
      timer.unref?.();
    };
    progress();
    return { release, progress };
  }
}
