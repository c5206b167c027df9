// `createOutboxRelay`: a relay that polls every shard database's outbox and delivers each event at
// least once. Here: its options' defaults and checks, one loop per database, `lag()` and
// `redrive()`. A poll of one database is `relay-poll.ts`, its SQL `relay-sql.ts`, the options and
// reports `relay-options.ts`.
import { scatter } from "@shardkit/scatter";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, RoutingOptionsError } from "./errors.js";
import type { Database, ShardClient } from "./registry.js";
import type { OutboxRelay, OutboxRelayOptions, RedriveFilter, RelayPollReport } from "./relay-options.js";
import { DeliveryTimeout, databasePoller } from "./relay-poll.js";
import { LAG, type Raw, REDRIVE } from "./relay-sql.js";
import { telemetryOf } from "./telemetry.js";
import { isShardUnavailable } from "./unavailable.js";

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
 * A relay that polls every shard database's outbox and delivers each event at least once: claims
 * are leases (no lock held while delivering), every delivery has a timeout, every outcome is
 * recorded on its own, each database has its own loop, and an event whose failure retrying can
 * fix (its shard down, a timeout) is retried until it is delivered.
 */
export function createOutboxRelay<Client extends ShardClient>(
  options: OutboxRelayOptions<Client>,
): OutboxRelay {
  const batchSize = options.batchSize ?? 100;
  const maxAttempts = options.maxAttempts ?? 10;
  const baseMs = options.backoff?.baseMs ?? 500;
  const maxMs = options.backoff?.maxMs ?? 60_000;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const deliveryTimeoutMs = options.deliveryTimeoutMs ?? 10_000;
  const leaseMs = options.leaseMs ?? 60_000;
  const lagTimeoutMs = options.lagTimeoutMs ?? 5000;
  const queryTimeoutMs = options.queryTimeoutMs ?? 30_000;
  if (!(Number.isFinite(queryTimeoutMs) && queryTimeoutMs > 0)) {
    throw new RoutingOptionsError([
      `queryTimeoutMs must be a positive number of milliseconds, got ${JSON.stringify(options.queryTimeoutMs)}`,
    ]);
  }
  const deliveryConcurrency = options.deliveryConcurrency ?? 8;
  if (!(Number.isSafeInteger(deliveryConcurrency) && deliveryConcurrency >= 1)) {
    throw new RoutingOptionsError([
      `deliveryConcurrency must be an integer >= 1, got ${JSON.stringify(options.deliveryConcurrency)}`,
    ]);
  }
  if (!(leaseMs > deliveryTimeoutMs)) {
    throw new RoutingOptionsError([
      `leaseMs (${leaseMs}) must be longer than deliveryTimeoutMs (${deliveryTimeoutMs}): a claim must outlast a delivery`,
    ]);
  }
  const retryable =
    options.retryable ?? ((error: unknown) => error instanceof DeliveryTimeout || isShardUnavailable(error));
  const logger = options.logger ?? console;
  const databases = options.registry.databases;
  /** Keys of the shards a database holds; databases themselves are keyed by index (names may repeat in a spare's ""). */
  const shardsOf = (p: Database<Client>) => p.shards.map((s) => s.key).join(",");
  const keyOf = (p: Database<Client>) => String(p.index);
  const whose = (p: Database<Client>) => ({ database: p.name, shards: shardsOf(p) });
  /** One of the relay's statements on `physical`, bounded by `queryTimeoutMs`. */
  const bounded = <T>(physical: Database<Client>, run: () => PromiseLike<T>) =>
    withDeadline(
      queryTimeoutMs,
      () => new DatabaseTimeoutError(physical.name, physical.shards, queryTimeoutMs),
      run,
    );
  const telemetry = telemetryOf(options.telemetry, "@shardkit/prisma");
  const pollDatabase = databasePoller({
    options,
    batchSize,
    maxAttempts,
    baseMs,
    maxMs,
    deliveryTimeoutMs,
    leaseMs,
    deliveryConcurrency,
    retryable,
    logger,
    bounded,
    whose,
    telemetry,
  });

  async function runOnce(): Promise<RelayPollReport> {
    const result = await scatter(databases, (physical) => pollDatabase(physical), {
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
  const wakers = new Set<() => void>();
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
    });

  /** One database's loop: a database that is down backs off on its own; the others go on. */
  async function loop(physical: Database<Client>): Promise<void> {
    let failures = 0;
    while (!stopping) {
      try {
        const report = await pollDatabase(physical);
        failures = 0;
        if (report.claimed < batchSize && !stopping) await pause(pollIntervalMs);
      } catch (error) {
        failures++;
        options.onError?.(error, physical.name, shardsOf(physical));
        if (!stopping) await pause(Math.min(maxMs, pollIntervalMs * 2 ** Math.min(failures - 1, 10)));
      }
    }
  }

  return {
    runOnce,
    start() {
      if (loops) return;
      stopping = false;
      loops = databases.map((physical) => loop(physical));
    },
    async stop(timeoutMs = 10_000) {
      stopping = true;
      for (const wake of [...wakers]) wake();
      const running = loops ?? [];
      loops = undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.all(running),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
    async lag() {
      const result = await scatter(
        databases,
        async (physical) => {
          const [row] = await (physical.client as unknown as Raw).$queryRawUnsafe<
            { pending: number; dead: number; oldest: number }[]
          >(
            LAG,
            physical.shards.map((shard) => shard.bits),
          );
          return { pending: row!.pending, dead: row!.dead, oldestPendingMs: Math.round(row!.oldest) };
        },
        { policy: "partial", deadlineMs: lagTimeoutMs, key: keyOf },
      );
      return result.outcomes.map((o) =>
        o.status === "fulfilled"
          ? { ...whose(o.target), ...o.value }
          : { ...whose(o.target), pending: null, dead: null, oldestPendingMs: null, error: o.error },
      );
    },
    async redrive(filter: RedriveFilter = {}) {
      const result = await scatter(
        databases,
        (physical) =>
          (physical.client as unknown as Raw).$executeRawUnsafe(
            REDRIVE,
            filter.ids ?? null,
            filter.topic ?? null,
            physical.shards.map((shard) => shard.bits),
          ),
        { policy: "partial", deadlineMs: lagTimeoutMs, key: keyOf },
      );
      return result.outcomes.map((o) =>
        o.status === "fulfilled"
          ? { ...whose(o.target), redriven: o.value }
          : { ...whose(o.target), redriven: null, error: o.error },
      );
    },
  };
}
