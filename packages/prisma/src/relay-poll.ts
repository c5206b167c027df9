// One poll of one database's outbox: claim a batch (a lease), deliver it in lanes (one per
// aggregate, in order; lanes side by side), each delivery bounded by its timeout and its outcome
// recorded on its own (delivered, retried with backoff, or dead), and release what the lease has
// no time left for. Its span per delivery and its lag and dead-letter metrics.
import { SpanKind } from "@opentelemetry/api";
import { ShardedUUID } from "@shardkit/id";
import { decodeJson } from "./codec.js";
import type { OutboxMessage } from "./outbox.js";
import type { Database, ShardClient } from "./registry.js";
import type { OutboxRelayOptions, RelayDatabaseReport } from "./relay-options.js";
import { CLAIM, DELIVERED, FAILED, type Raw, RELEASE, type Row } from "./relay-sql.js";
import { ATTR, endWithError, type Telemetry } from "./telemetry.js";

/** A delivery that did not finish within `deliveryTimeoutMs`. */
export class DeliveryTimeout extends Error {
  override name = "DeliveryTimeout";
}

/** What a poll takes from its relay: the options, their values with defaults filled in, its helpers. */
export interface PollSettings<Client extends ShardClient> {
  options: OutboxRelayOptions<Client>;
  batchSize: number;
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
  deliveryTimeoutMs: number;
  leaseMs: number;
  deliveryConcurrency: number;
  retryable(error: unknown): boolean;
  logger: { warn(message: string): void };
  /** One of the relay's statements on `physical`, bounded by `queryTimeoutMs`. */
  bounded<T>(physical: Database<Client>, run: () => PromiseLike<T>): Promise<T>;
  /** The database's name and the keys of the shards it holds, for reports. */
  whose(physical: Database<Client>): { database: string; shards: string };
  telemetry: Telemetry | undefined;
}

/** The poll of one database, with the relay's settings and instruments (made once, here). */
export function databasePoller<Client extends ShardClient>(
  settings: PollSettings<Client>,
): (physical: Database<Client>) => Promise<RelayDatabaseReport> {
  const {
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
  } = settings;
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

  return pollDatabase;
}
