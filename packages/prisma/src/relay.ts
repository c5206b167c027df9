import { SpanKind } from "@opentelemetry/api";
import { ShardedUUID } from "@shardkit/id";
import { scatter } from "@shardkit/scatter";
import { decodeJson } from "./codec.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, RoutingOptionsError } from "./errors.js";
import type { OutboxMessage } from "./outbox.js";
import type { Database, ShardClient, ShardRegistry } from "./registry.js";
import { shardBitsSql } from "./sql.js";
import { ATTR, endWithError, type TelemetryOption, telemetryOf } from "./telemetry.js";
import { isShardUnavailable } from "./unavailable.js";

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

type Raw = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};
type Row = {
  id: string;
  topic: string;
  aggregateId: string;
  payload: string;
  createdAt: Date;
  attempts: number;
};

// A claim is a lease, committed before anything is delivered: the events' `availableAt` moves
// past the lease and `attempts` counts the attempt. No row lock is held while delivering; a relay
// that dies leaves its events to be claimed again when the lease ends. `attempts` fences every
// outcome: an outcome reported after the lease was lost (and the event claimed again) changes nothing.
// (UPDATE ... RETURNING keeps no order: the claimed events are sorted again, oldest first.)
/**
 * Only the events of shards the database owns now: after a shard moved away, its old copy stays
 * until it is cleaned up, and it is the new owner's relay that delivers its events.
 */
const OWNED = `${shardBitsSql("id")} = ANY($3::int[])`;
const CLAIM = `WITH claimed AS (
    UPDATE "OutboxEvent" SET "availableAt" = now() + ($2::int * interval '1 millisecond'), attempts = attempts + 1
    WHERE id IN (SELECT id FROM "OutboxEvent" WHERE status = 'pending' AND "availableAt" <= now()
                   AND ${OWNED}
                 ORDER BY "createdAt", id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING id, topic, "aggregateId", payload, "createdAt", attempts)
  SELECT id::text AS id, topic, "aggregateId"::text AS "aggregateId", payload, "createdAt", attempts
  FROM claimed ORDER BY "createdAt", id`;
const DELIVERED = `UPDATE "OutboxEvent" SET status = 'delivered', "deliveredAt" = now()
  WHERE id = $1::uuid AND attempts = $2 AND status = 'pending'`;
const FAILED = `UPDATE "OutboxEvent" SET "lastError" = $3, status = $4, "availableAt" = now() + ($5::int * interval '1 millisecond')
  WHERE id = $1::uuid AND attempts = $2 AND status = 'pending'`;
/** Claimed events the batch had no time left to deliver: back to pending, the attempt not counted. */
const RELEASE = `UPDATE "OutboxEvent" o SET "availableAt" = now(), attempts = o.attempts - 1
  FROM unnest($1::uuid[], $2::int[]) AS r(id, attempts)
  WHERE o.id = r.id AND o.attempts = r.attempts AND o.status = 'pending'`;
const LAG = `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
  count(*) FILTER (WHERE status = 'dead')::int AS dead,
  coalesce(extract(epoch FROM now() - min("createdAt") FILTER (WHERE status = 'pending')) * 1000, 0)::float8 AS oldest
  FROM "OutboxEvent" WHERE ${shardBitsSql("id")} = ANY($1::int[])`;
const REDRIVE = `UPDATE "OutboxEvent" SET status = 'pending', attempts = 0, "availableAt" = now(), "lastError" = NULL
  WHERE status = 'dead' AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[])) AND ($2::text IS NULL OR topic = $2)
    AND ${shardBitsSql("id")} = ANY($3::int[])`;

/** A delivery that did not finish within `deliveryTimeoutMs`. */
class DeliveryTimeout extends Error {
  override name = "DeliveryTimeout";
}

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
  const lagHistogram = telemetry?.metering
    ? telemetry.histogram(
        "shardkit.relay.lag",
        "Age of the oldest outbox event a relay poll claimed, per database (0 when it claimed none)",
        "ms",
      )
    : undefined;
  const deadLetters = telemetry?.metering
    ? telemetry.counter("shardkit.relay.dead_letters", "Outbox events moved to the dead-letter state")
    : undefined;

  async function deliverOne(message: OutboxMessage): Promise<void> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new DeliveryTimeout(`delivery timed out after ${deliveryTimeoutMs} ms`);
        controller.abort(error);
        reject(error);
      }, deliveryTimeoutMs);
    });
    try {
      await Promise.race([options.deliver(message, { signal: controller.signal }), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Delivers one claimed event and records its outcome (fenced by its attempt count). */
  async function deliverRow(
    physical: Database<Client>,
    row: Row,
    report: RelayDatabaseReport,
  ): Promise<void> {
    const db = physical.client as unknown as Raw;
    const databaseName = physical.name;
    const message: OutboxMessage = {
      id: row.id,
      topic: row.topic,
      aggregateId: row.aggregateId,
      payload: decodeJson(row.payload),
      createdAt: row.createdAt,
      attempts: row.attempts - 1,
      shard: ShardedUUID.shardOf(row.id),
    };
    const span = telemetry?.tracing()
      ? telemetry.startSpan(
          "shardkit.relay.deliver",
          {
            "messaging.destination.name": row.topic,
            "messaging.message.id": row.id,
            "shardkit.relay.topic": row.topic,
            "shardkit.relay.event_id": row.id,
            "shardkit.relay.attempt": row.attempts,
            [ATTR.shard]: message.shard.key,
            [ATTR.database]: databaseName,
          },
          undefined,
          SpanKind.PRODUCER,
        )
      : undefined;
    try {
      await deliverOne(message);
      span?.end();
    } catch (error) {
      if (span) endWithError(span, error);
      const dead = row.attempts >= maxAttempts && !retryable(error);
      const delay = Math.min(maxMs, baseMs * 2 ** (row.attempts - 1));
      const text = error instanceof Error ? error.message : String(error);
      await bounded(physical, () =>
        db.$executeRawUnsafe(
          FAILED,
          row.id,
          row.attempts,
          text.slice(0, 2000),
          dead ? "dead" : "pending",
          delay,
        ),
      );
      if (dead) {
        report.dead++;
        logger.warn(
          `[shardkit] outbox event ${row.id} (${row.topic}) is dead after ${row.attempts} attempts: ${text.slice(0, 200)}`,
        );
        options.onDead?.(message, error);
        deadLetters?.add(1, { "shardkit.relay.topic": row.topic, [ATTR.database]: databaseName });
      } else report.retried++;
      return;
    }
    await bounded(physical, () => db.$executeRawUnsafe(DELIVERED, row.id, row.attempts));
    report.delivered++;
  }

  async function pollDatabase(physical: Database<Client>): Promise<RelayDatabaseReport> {
    const report: RelayDatabaseReport = {
      ...whose(physical),
      claimed: 0,
      delivered: 0,
      retried: 0,
      dead: 0,
    };
    const db = physical.client as unknown as Raw;
    const leaseEnds = Date.now() + leaseMs;
    const rows = await bounded(physical, () =>
      db.$queryRawUnsafe<Row[]>(
        CLAIM,
        batchSize,
        leaseMs,
        physical.shards.map((shard) => shard.bits),
      ),
    );
    report.claimed = rows.length;
    lagHistogram?.record(
      rows.length > 0 ? Math.max(0, Date.now() - new Date(rows[0]!.createdAt).getTime()) : 0,
      {
        [ATTR.database]: physical.name,
      },
    );
    // One lane per aggregate: its events are delivered in order, and lanes run side by side (at
    // most `deliveryConcurrency`), so an event whose consumer waits on a slow or frozen database
    // holds up only its own aggregate, never the rest of the batch.
    const lanes = new Map<string, Row[]>();
    for (const row of rows) {
      const lane = lanes.get(row.aggregateId);
      if (lane) lane.push(row);
      else lanes.set(row.aggregateId, [row]);
    }
    const queue = [...lanes.values()];
    const released: Row[] = [];
    const work = async () => {
      for (let lane = queue.shift(); lane; lane = queue.shift()) {
        for (const [i, row] of lane.entries()) {
          if (Date.now() + deliveryTimeoutMs > leaseEnds) {
            // No time left to deliver within the lease: let the rest be claimed again at once.
            released.push(...lane.slice(i));
            break;
          }
          await deliverRow(physical, row, report);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(deliveryConcurrency, queue.length) }, work));
    if (released.length > 0) {
      await bounded(physical, () =>
        db.$executeRawUnsafe(
          RELEASE,
          released.map((r) => r.id),
          released.map((r) => r.attempts),
        ),
      );
      report.claimed -= released.length;
    }
    return report;
  }

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
