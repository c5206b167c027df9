// `createOutboxRelay`: a relay that polls every shard database's outbox and delivers each event at
// least once. Here: the schedule of each database's polls (turns, idle pauses, `notify()`),
// `runOnce()`, `lag()` and `redrive()`. A poll of one database is `relay-poll.ts`, its SQL
// `relay-sql.ts`, the turns `relay-turns.ts`, the options, their defaults and the reports
// `relay-options.ts`.
import { scatter } from "@shardkit/scatter";
import { orAfter } from "../deadline.js";
import { type Database, type ShardClient, type ShardRef, type ShardRegistry, toShard } from "../registry.js";
import {
  type OutboxLag,
  type OutboxRelay,
  type OutboxRelayOptions,
  type RedriveFilter,
  type RedriveReport,
  type RelayPollReport,
  relaySettings,
} from "./relay-options.js";
import { databasePoller, whose } from "./relay-poll.js";
import { LAG, type Raw, REDRIVE } from "./relay-sql.js";
import { Turns } from "./relay-turns.js";

export type {
  OutboxLag,
  OutboxRelay,
  OutboxRelayOptions,
  RedriveFilter,
  RedriveReport,
  RelayDatabaseReport,
  RelayPollReport,
} from "./relay-options.js";

/**
 * The pause before a database's next poll, after one that claimed `claimed` events, the last
 * `emptyPolls` of its polls in a row having claimed none. A full batch: none (the database polls
 * again at its next turn; the turns of the databases already waiting come first). Some events:
 * `pollIntervalMs`. Nothing: `pollIntervalMs`, doubling with each empty poll up to `maxIdleMs`, so an
 * idle fleet costs a claim per database every `maxIdleMs` rather than every `pollIntervalMs`.
 */
export function pauseAfter(
  claimed: number,
  emptyPolls: number,
  settings: { batchSize: number; pollIntervalMs: number; maxIdleMs: number },
): number {
  if (claimed >= settings.batchSize) return 0;
  const doublings = Math.min(Math.max(emptyPolls - 1, 0), 30);
  return Math.min(settings.maxIdleMs, settings.pollIntervalMs * 2 ** doublings);
}

/**
 * Every database's outbox: pending and dead events, and the age of the oldest pending one. Reads
 * only; every database is asked at once, each bounded by `timeoutMs` (default 5 s): one that does
 * not answer in time is reported with `null` counts and its error, the others all the same. What
 * `relay.lag()` reports, for readers that deliver nothing (`shardkit status`, the dashboard).
 */
export async function readOutboxLag<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: { timeoutMs?: number } = {},
): Promise<OutboxLag[]> {
  const result = await scatter(
    registry.databases,
    async (physical) => {
      const [row] = await (physical.client as unknown as Raw).$queryRawUnsafe<
        { pending: number; dead: number; oldest: number }[]
      >(
        LAG,
        physical.shards.map((shard) => shard.bits),
      );
      return { pending: row!.pending, dead: row!.dead, oldestPendingMs: Math.round(row!.oldest) };
    },
    { policy: "partial", deadlineMs: options.timeoutMs ?? 5000, key: (p) => String(p.index) },
  );
  return result.outcomes.map((o) =>
    o.status === "fulfilled"
      ? { ...whose(o.target), ...o.value }
      : { ...whose(o.target), pending: null, dead: null, oldestPendingMs: null, error: o.error },
  );
}

/**
 * Moves dead letters (those `filter` picks: ids, topic) back to pending on every database at once,
 * each for the shards it holds, each bounded by `timeoutMs` (default 5 s); a database that does not
 * answer in time is reported with `redriven: null` and its error (it may still have redriven them:
 * running it again is harmless). A relay delivers them at its next poll; `relay.redrive()` also
 * wakes its own. One report per database, in the registry's order.
 */
export async function redriveOutbox<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  filter: RedriveFilter = {},
  options: { timeoutMs?: number } = {},
): Promise<RedriveReport[]> {
  const result = await scatter(
    registry.databases,
    (physical) =>
      (physical.client as unknown as Raw).$executeRawUnsafe(
        REDRIVE,
        filter.ids ?? null,
        filter.topic ?? null,
        physical.shards.map((shard) => shard.bits),
      ),
    { policy: "partial", deadlineMs: options.timeoutMs ?? 5000, key: (p) => String(p.index) },
  );
  return result.outcomes.map((o) =>
    o.status === "fulfilled"
      ? { ...whose(o.target), redriven: o.value }
      : { ...whose(o.target), redriven: null, error: o.error },
  );
}

/**
 * A relay that polls every shard database's outbox and delivers each event at least once: claims
 * are leases (no lock held while delivering), every delivery has a timeout, outcomes are recorded a
 * group per statement as they come, and an event whose failure retrying can fix (its shard down, a
 * timeout) is retried until it is delivered. Its work is limited for the whole fleet: at most
 * `pollConcurrency` databases polled and `deliveryConcurrency` deliveries in flight at once, the
 * databases taking turns.
 * Longer than 80 lines: one closure: the relay's methods share its turns and poll loops.
 */
export function createOutboxRelay<Client extends ShardClient>(
  options: OutboxRelayOptions<Client>,
): OutboxRelay {
  const settings = relaySettings(options);
  const { registry, pollIntervalMs, maxMs, lagTimeoutMs } = settings;
  const databases = registry.databases;
  /** Databases are keyed by index (names may repeat in a spare's ""). */
  const keyOf = (p: Database<Client>) => String(p.index);
  const pollDatabase = databasePoller(settings, {
    polls: new Turns(settings.pollConcurrency),
    deliveries: new Turns(settings.deliveryConcurrency),
  });

  async function runOnce(): Promise<RelayPollReport> {
    const result = await scatter(databases, async (physical) => (await pollDatabase(physical))!, {
      policy: "partial",
      key: keyOf,
    });
    return {
      databases: result.values,
      missing: result.missing.map((m) => ({ ...whose(m.target), error: m.error })),
    };
  }

  let loops: Promise<void>[] | undefined;
  let stopping = false;
  /** Bumped by each `start()`: a loop of an earlier start that still waits for its turn ends then. */
  let generation = 0;
  /** Per database (by index): whether it was notified since its last claim, and how to end its pause. */
  const notified = databases.map(() => false);
  const wakers = new Map<number, () => void>();
  const pause = (index: number, ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(index);
        resolve();
      };
      // Past what a timer holds (about 24.8 days; a `maxIdleMs` of Infinity), Node would fire at once.
      const timer = setTimeout(wake, Math.min(ms, 2 ** 31 - 1));
      wakers.set(index, wake);
    });
  const notifyDatabase = (index: number) => {
    notified[index] = true;
    wakers.get(index)?.();
  };

  /**
   * One database's schedule: its polls, each in its turn, with `pauseAfter` between them; a
   * `notify()` ends a pause. A database that fails backs off on its own; the others go on.
   */
  async function loop(physical: Database<Client>, started: number): Promise<void> {
    const running = () => !stopping && generation === started;
    let failures = 0;
    let empty = 0;
    while (running()) {
      notified[physical.index] = false;
      let wait: number;
      try {
        const report = await pollDatabase(physical, running);
        if (!report) break;
        failures = 0;
        empty = report.claimed === 0 ? empty + 1 : 0;
        wait = pauseAfter(report.claimed, empty, settings);
      } catch (error) {
        failures++;
        settings.onError?.(error, physical.name, whose(physical).shards);
        wait = Math.min(maxMs, pollIntervalMs * 2 ** Math.min(failures - 1, 10));
      }
      // Events written while the claim ran (`notify()` then) would wait a whole pause: poll again.
      if (wait > 0 && running() && !(notified[physical.index] && failures === 0)) {
        await pause(physical.index, wait);
      }
    }
  }

  return {
    runOnce,
    start() {
      if (loops) return;
      stopping = false;
      generation++;
      loops = databases.map((physical) => loop(physical, generation));
    },
    notify(shardOrId?: ShardRef) {
      if (shardOrId === undefined) for (const physical of databases) notifyDatabase(physical.index);
      else notifyDatabase(registry.databaseOf(toShard(shardOrId)).index);
    },
    async stop(timeoutMs = 10_000) {
      stopping = true;
      for (const wake of [...wakers.values()]) wake();
      const running = loops ?? [];
      loops = undefined;
      await orAfter(timeoutMs, undefined, () => Promise.all(running));
    },
    lag: () => readOutboxLag(registry, { timeoutMs: lagTimeoutMs }),
    async redrive(filter: RedriveFilter = {}) {
      const report = await redriveOutbox(registry, filter, { timeoutMs: lagTimeoutMs });
      // What came back to pending goes out at its database's next turn, not after an idle pause.
      for (const [i, r] of report.entries()) if ((r.redriven ?? 0) > 0) notifyDatabase(databases[i]!.index);
      return report;
    },
  };
}
