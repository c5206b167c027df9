// What `createOutboxRelay` takes and gives back: its options (delivery, retries and dead letters,
// how much runs at once, polling, timeouts, telemetry), their defaults and checks (`relaySettings`),
// the relay's methods, the reports of a poll, of `lag()` and of `redrive()`, and what a delivery that
// timed out throws.
import { RoutingOptionsError } from "../errors.js";
import type { OutboxMessage } from "../outbox.js";
import type { ShardClient, ShardRef, ShardRegistry } from "../registry.js";
import type { TelemetryOption } from "../telemetry.js";
import { isShardUnavailable } from "../unavailable.js";

export interface OutboxRelayOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /**
   * Delivers one event (publish it, call a handler, ...). Resolving marks it delivered; throwing
   * schedules a retry with backoff. Delivery is at least once: a relay that dies or times out
   * mid-delivery leaves its event to be delivered again, so consumers must be idempotent. `signal`
   * aborts when the delivery times out (`deliveryTimeoutMs`).
   */
  deliver(message: OutboxMessage, context: { signal: AbortSignal }): Promise<void>;
  /**
   * Deliveries in flight at once, for the whole relay (every database's together): events of
   * different aggregates go side by side, those of one aggregate one after another, in order.
   * Default 8.
   */
  deliveryConcurrency?: number;
  /**
   * Databases polled at once, for the whole relay: a poll claims a batch, delivers it and records
   * its outcomes, with one statement at a time on its database, so this bounds the relay's
   * statements in flight however many databases there are. Databases take turns in the order they
   * became due: a database with a backlog polls again only after every other database that was
   * waiting had its turn. Default 4.
   */
  pollConcurrency?: number;
  /**
   * A poll that waits this long for its database or a delivery (no statement answered, no delivery
   * ended) gives its turn to the next database and goes on without one, so a frozen server or a
   * hung consumer holds up only its own database's events. Default 1000 ms.
   */
  stallMs?: number;
  /** Events claimed per database per poll. Default 100. */
  batchSize?: number;
  /**
   * After this many attempts an event whose delivery fails with an error retrying cannot fix moves
   * to the dead-letter state (see `retryable`). Default 10.
   */
  maxAttempts?: number;
  /**
   * Whether a failed delivery may succeed later, so it is retried however many attempts it took
   * (with backoff capped at `backoff.maxMs`), never dead-lettered. Default: a shard that is
   * unavailable (`isShardUnavailable`) or a delivery that timed out.
   */
  retryable?(error: unknown): boolean;
  /** Retry delay: `baseMs * 2^(attempts-1)`, capped at `maxMs`. Defaults 500 ms and 60 s. */
  backoff?: { baseMs?: number; maxMs?: number };
  /**
   * When `start()`ed: the pause before a database is polled again after a poll that claimed fewer
   * than `batchSize` events. Default 1000 ms. After a poll that claimed nothing the pause doubles,
   * up to `maxIdleMs`, and is back to this as soon as a poll claims something or `notify()` is called.
   */
  pollIntervalMs?: number;
  /**
   * The longest pause between two polls of a database that has had nothing to deliver: an event
   * written there is claimed at most this long after it is written (plus its database's wait for a
   * turn), or at once after `notify()`. Default 10 times `pollIntervalMs` (10 s).
   */
  maxIdleMs?: number;
  /** How long one delivery may take before it counts as failed (and is retried). Default 10 s. */
  deliveryTimeoutMs?: number;
  /**
   * How long a claim holds its events (no other relay takes them meanwhile). A relay that dies
   * mid-batch leaves its events to be claimed again after this. Default 60 s.
   */
  leaseMs?: number;
  /** How long `lag()` waits for a database before reporting it unavailable. Default 5 s. */
  lagTimeoutMs?: number;
  /**
   * How long one of the relay's own statements (claiming a batch, recording an outcome, releasing
   * what a batch had no time for) may take before the poll of its database fails with
   * `DatabaseTimeoutError` (reported to `onError`, retried with backoff; the other databases go on).
   * A late statement may still take effect: claimed events come back when their lease ends, an
   * outcome not recorded means the event is delivered again. Default 30 s.
   */
  queryTimeoutMs?: number;
  /**
   * Receives poll failures of a database (e.g. its server is down) while `start()`ed, with the
   * database's name (`registry.databases[i].name`) and the keys of the shards it holds.
   */
  onError?(error: unknown, database: string, shards: string): void;
  /** Called for every event moved to the dead-letter state (also logged as a warning). */
  onDead?(message: OutboxMessage, error: unknown): void;
  /** Where dead letters are logged. Default `console`. */
  logger?: { warn(message: string): void };
  /**
   * OpenTelemetry: a span per delivery (`shardkit.relay.deliver`), metrics `shardkit.relay.lag`
   * (age of the oldest event each poll claimed, per database) and `shardkit.relay.dead_letters`.
   * Default the API's global providers; `false`: none (see `shardRouting`'s `telemetry`).
   */
  telemetry?: TelemetryOption;
}

/** What one poll did on one physical database. */
export interface RelayDatabaseReport {
  /** The database's name in the registry (`registry.databases[i].name`): unique, also for spares. */
  database: string;
  /** Keys of the logical shards that database holds, e.g. "1/0,1/1" ("" for a spare database). */
  shards: string;
  claimed: number;
  delivered: number;
  retried: number;
  dead: number;
}

export interface RelayPollReport {
  databases: RelayDatabaseReport[];
  /** Databases that could not be polled, and why. */
  missing: { database: string; shards: string; error: unknown }[];
}

/** One database's outbox: `null` counts (and `error`) when the database did not answer in time. */
export interface OutboxLag {
  /** The database's name in the registry. */
  database: string;
  /** Keys of the logical shards it holds ("" for a spare database). */
  shards: string;
  pending: number | null;
  dead: number | null;
  /** Age of the oldest pending event in ms (0 when none). */
  oldestPendingMs: number | null;
  error?: unknown;
}

/**
 * What `redrive` did on one database. `redriven` is null, and `error` says why, when the database
 * failed or did not answer within `lagTimeoutMs` (then it may still have redriven them: running
 * `redrive` again is harmless). The other databases' counts are reported all the same.
 */
export interface RedriveReport {
  database: string;
  shards: string;
  redriven: number | null;
  error?: unknown;
}

/** Which dead letters `redrive` puts back: all of them by default. */
export interface RedriveFilter {
  /** Only events of these IDs. */
  ids?: string[];
  /** Only events of this topic. */
  topic?: string;
}

export interface OutboxRelay {
  /** Polls every database once (`pollConcurrency` at a time) and delivers what it claimed. */
  runOnce(): Promise<RelayPollReport>;
  /**
   * Polls every database until `stop()`, each on its own schedule, taking turns: a slow or frozen
   * database never delays another's events beyond a turn, a database with nothing to deliver is
   * polled less and less often (up to `maxIdleMs` apart).
   */
  start(): void;
  /**
   * Says that events were written to the database holding `shardOrId`'s shard (every database when
   * none is given): when `start()`ed, it is polled at its next turn rather than after its pause. A
   * process that writes events and runs the relay calls it after each commit to deliver at once.
   */
  notify(shardOrId?: ShardRef): void;
  /** Stops polling and waits (up to `timeoutMs`, default 10 s) for the polls in flight. */
  stop(timeoutMs?: number): Promise<void>;
  /** Pending and dead events and the oldest pending event's age, per database. */
  lag(): Promise<OutboxLag[]>;
  /**
   * Moves dead letters back to pending, to be delivered again; the count per database, of the
   * shards it holds (a copy left behind by a move is not its relay's to deliver). A database
   * that is down gets `redriven: null` and its error; the others are redriven all the same (running
   * it again later is harmless).
   */
  redrive(filter?: RedriveFilter): Promise<RedriveReport[]>;
}

/** A delivery that did not finish within `deliveryTimeoutMs` (retried: see `retryable`). */
export class DeliveryTimeout extends Error {
  override name = "DeliveryTimeout";
}

/** The options with their defaults filled in and checked: what the relay and each poll read. */
export interface RelaySettings<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  deliver: OutboxRelayOptions<Client>["deliver"];
  onError: OutboxRelayOptions<Client>["onError"];
  onDead: OutboxRelayOptions<Client>["onDead"];
  telemetry: TelemetryOption | undefined;
  batchSize: number;
  maxAttempts: number;
  /** Retry delays (`backoff`), in ms. */
  baseMs: number;
  maxMs: number;
  deliveryConcurrency: number;
  pollConcurrency: number;
  stallMs: number;
  pollIntervalMs: number;
  maxIdleMs: number;
  deliveryTimeoutMs: number;
  leaseMs: number;
  lagTimeoutMs: number;
  queryTimeoutMs: number;
  retryable(error: unknown): boolean;
  logger: { warn(message: string): void };
}

/** `options` with their defaults; a `RoutingOptionsError` listing every value that cannot work. */
export function relaySettings<Client extends ShardClient>(
  options: OutboxRelayOptions<Client>,
): RelaySettings<Client> {
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const settings: RelaySettings<Client> = {
    registry: options.registry,
    deliver: options.deliver,
    onError: options.onError,
    onDead: options.onDead,
    telemetry: options.telemetry,
    batchSize: options.batchSize ?? 100,
    maxAttempts: options.maxAttempts ?? 10,
    baseMs: options.backoff?.baseMs ?? 500,
    maxMs: options.backoff?.maxMs ?? 60_000,
    deliveryConcurrency: options.deliveryConcurrency ?? 8,
    pollConcurrency: options.pollConcurrency ?? 4,
    stallMs: options.stallMs ?? 1000,
    pollIntervalMs,
    maxIdleMs: options.maxIdleMs ?? 10 * pollIntervalMs,
    deliveryTimeoutMs: options.deliveryTimeoutMs ?? 10_000,
    leaseMs: options.leaseMs ?? 60_000,
    lagTimeoutMs: options.lagTimeoutMs ?? 5000,
    queryTimeoutMs: options.queryTimeoutMs ?? 30_000,
    retryable:
      options.retryable ??
      ((error: unknown) => error instanceof DeliveryTimeout || isShardUnavailable(error)),
    logger: options.logger ?? console,
  };
  const problems: string[] = [];
  if (!(Number.isFinite(settings.queryTimeoutMs) && settings.queryTimeoutMs > 0)) {
    problems.push(
      `queryTimeoutMs must be a positive number of milliseconds, got ${JSON.stringify(options.queryTimeoutMs)}`,
    );
  }
  if (!(settings.stallMs > 0)) {
    problems.push(
      `stallMs must be a positive number of milliseconds, got ${JSON.stringify(options.stallMs)}`,
    );
  }
  for (const key of ["deliveryConcurrency", "pollConcurrency"] as const) {
    if (!(Number.isSafeInteger(settings[key]) && settings[key] >= 1)) {
      problems.push(`${key} must be an integer >= 1, got ${JSON.stringify(options[key])}`);
    }
  }
  if (!(settings.maxIdleMs >= pollIntervalMs)) {
    problems.push(
      `maxIdleMs (${settings.maxIdleMs}) must be at least pollIntervalMs (${pollIntervalMs}): it bounds the pauses that start there`,
    );
  }
  if (!(settings.leaseMs > settings.deliveryTimeoutMs)) {
    problems.push(
      `leaseMs (${settings.leaseMs}) must be longer than deliveryTimeoutMs (${settings.deliveryTimeoutMs}): a claim must outlast a delivery`,
    );
  }
  if (problems.length > 0) throw new RoutingOptionsError(problems);
  return settings;
}
