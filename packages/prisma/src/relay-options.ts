// What `createOutboxRelay` takes and gives back: its options (delivery, retries and dead letters,
// timeouts, telemetry), the relay's methods, and the reports of a poll, of `lag()` and of `redrive()`.
import type { OutboxMessage } from "./outbox.js";
import type { ShardClient, ShardRegistry } from "./registry.js";
import type { TelemetryOption } from "./telemetry.js";

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
   * Deliveries in flight at once per database: events of different aggregates go side by side,
   * those of one aggregate one after another, in order. Default 8.
   */
  deliveryConcurrency?: number;
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
  /** Pause between polls of a database when `start()`ed and its poll found nothing. Default 1000 ms. */
  pollIntervalMs?: number;
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
  /** Polls every database once, in parallel, and delivers what it claimed. */
  runOnce(): Promise<RelayPollReport>;
  /** Polls every database in its own loop until `stop()`: a slow or frozen database never delays another. */
  start(): void;
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
