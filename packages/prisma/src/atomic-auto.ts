// A router's own recovery of atomic actions, on by default, driven by events rather than a clock
// (principle 10: a router adds no idle polling). A round of `recoverAtomic` runs when the router's
// first atomic action starts (it concludes what an earlier process, this router's predecessor, left
// past its lease), and again `everyMs` after anything that may have left a prepared transaction: an
// atomic action of this router that failed or whose participant did not answer its commit, or a
// round that left something in doubt. When nothing is in doubt, nothing runs. A fleet-wide sweep of
// what routers that never came back left is `startAtomicRecovery` in one process, or
// `shardkit recover` on a schedule.
import type { AtomicRecoveryReport } from "./atomic-recover.js";
import { orAfter } from "./deadline.js";
import { RoutingOptionsError } from "./errors.js";

/** `shardRouting({ atomicRecovery })`: the router's own recovery of atomic actions; `false` turns it off. */
export type AtomicRecoveryOption =
  | false
  | {
      /** A coordinator's lease: prepared transactions younger than this are left alone. Default 10 s. */
      leaseMs?: number;
      /** How long after an event (or a round that left something in doubt) the next round runs. Default: the lease. */
      everyMs?: number;
      /** A round that failed (a database did not answer): the next one runs `everyMs` later. */
      onError?: (error: unknown) => void;
      /** Each round's report. */
      onReport?: (report: AtomicRecoveryReport) => void;
    };

/** What a routed client tells its recovery: an atomic action starts; something may be left prepared. */
export interface AtomicWatch {
  used(): void;
  unsettled(): void;
  close(): Promise<void>;
}

const DEFAULT_LEASE_MS = 10_000;

/** The options checked, or undefined for `false`. Throws `RoutingOptionsError` naming a bad value. */
export function atomicRecoveryOptions(option: AtomicRecoveryOption | undefined) {
  if (option === false) return undefined;
  const leaseMs = option?.leaseMs ?? DEFAULT_LEASE_MS;
  const everyMs = option?.everyMs ?? Math.max(leaseMs, 1000);
  const issues: string[] = [];
  if (!(Number.isFinite(leaseMs) && leaseMs >= 0))
    issues.push(`atomicRecovery.leaseMs: expected a number of ms >= 0, got ${String(leaseMs)}`);
  if (!(Number.isFinite(everyMs) && everyMs > 0))
    issues.push(`atomicRecovery.everyMs: expected a positive number of ms, got ${String(everyMs)}`);
  if (issues.length > 0) throw new RoutingOptionsError(issues);
  return { ...option, leaseMs, everyMs };
}

/**
 * The watch of one routed client: `recover(leaseMs)` runs a round (`recoverAtomic` over every
 * database). Rounds never overlap; `close()` (the registry's disconnect) stops it and waits for a
 * round under way.
 */
export function watchAtomic(
  recover: (leaseMs: number) => Promise<AtomicRecoveryReport>,
  options: NonNullable<ReturnType<typeof atomicRecoveryOptions>>,
): AtomicWatch {
  let started = false;
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  const schedule = () => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      round();
    }, options.everyMs);
    timer.unref?.();
  };
  const round = () => {
    if (closed) return;
    if (running) {
      schedule();
      return;
    }
    running = recover(options.leaseMs)
      .then(
        (report) => {
          options.onReport?.(report);
          if (report.unanswered.length > 0 || report.transactions.some((t) => t.outcome === "left"))
            schedule();
        },
        (error: unknown) => {
          options.onError?.(error);
          schedule();
        },
      )
      .finally(() => {
        running = undefined;
      });
  };
  return {
    used() {
      if (started) return;
      started = true;
      round();
    },
    unsettled: schedule,
    async close() {
      closed = true;
      clearTimeout(timer);
      // A round held up by a database that does not answer must not hold up the disconnect for ever.
      await orAfter(5000, undefined, () => running ?? Promise.resolve());
    },
  };
}
