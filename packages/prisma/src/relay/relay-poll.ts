// One poll of one database's outbox, in its turn among the relay's databases: claim a batch (a
// lease), deliver it in lanes (one per aggregate, in order; lanes side by side, each delivery in
// one of the relay's delivery turns and bounded by its timeout), record the outcomes (delivered,
// retried with backoff, or dead) a group per statement, and release what the lease has no time
// left for. Its span per delivery and its lag and dead-letter metrics.
import { SpanKind } from "@opentelemetry/api";
import { ShardedUUID } from "@shardkit/id";
import { decodeJson } from "../codec.js";
import { withDeadline } from "../deadline.js";
import { DatabaseTimeoutError } from "../errors.js";
import type { OutboxMessage } from "../outbox.js";
import type { Database, ShardClient } from "../registry.js";
import { ATTR, endWithError, telemetryOf } from "../telemetry.js";
import { DeliveryTimeout, type RelayDatabaseReport, type RelaySettings } from "./relay-options.js";
import { CLAIM, type Raw, RECORD, RELEASE, type Row } from "./relay-sql.js";
import type { Turn, Turns } from "./relay-turns.js";

/** The database's name and the keys of the shards it holds, for reports. */
export function whose(physical: Database<unknown>): { database: string; shards: string } {
  return { database: physical.name, shards: physical.shards.map((s) => s.key).join(",") };
}

/** What one delivery came to, recorded with the others of its group. */
interface Outcome {
  row: Row;
  message: OutboxMessage;
  status: "delivered" | "pending" | "dead";
  /** The delivery's error, and its text as recorded ("" for a delivery). */
  error?: unknown;
  text: string;
  /** Until a failed delivery is tried again. */
  delayMs: number;
}

/**
 * The poll of one database, with the relay's settings and turns (`polls`: databases polled at once;
 * `deliveries`: deliveries in flight at once), and its instruments (made once, here).
 * Longer than 80 lines: one closure over the relay's settings and instruments, made once.
 */
export function databasePoller<Client extends ShardClient>(
  settings: RelaySettings<Client>,
  turns: { polls: Turns; deliveries: Turns },
): (physical: Database<Client>, wanted?: () => boolean) => Promise<RelayDatabaseReport | undefined> {
  const telemetry = telemetryOf(settings.telemetry, "@shardkit/prisma");
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

  /** One of the relay's statements on `physical`, bounded by `queryTimeoutMs`. */
  const bounded = <T>(physical: Database<Client>, run: () => PromiseLike<T>) =>
    withDeadline(
      settings.queryTimeoutMs,
      () => new DatabaseTimeoutError(physical.name, physical.shards, settings.queryTimeoutMs),
      run,
    );

  async function deliverOne(message: OutboxMessage): Promise<void> {
    await withDeadline(
      settings.deliveryTimeoutMs,
      () => new DeliveryTimeout(`delivery timed out after ${settings.deliveryTimeoutMs} ms`),
      (signal) => settings.deliver(message, { signal }),
    );
  }

  /** Delivers one claimed event: what came of it, to be recorded (it never throws). */
  async function attempt(physical: Database<Client>, row: Row): Promise<Outcome> {
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
            [ATTR.database]: physical.name,
          },
          undefined,
          SpanKind.PRODUCER,
        )
      : undefined;
    try {
      await deliverOne(message);
      span?.end();
      return { row, message, status: "delivered", text: "", delayMs: 0 };
    } catch (error) {
      if (span) endWithError(span, error);
      const dead = row.attempts >= settings.maxAttempts && !settings.retryable(error);
      const text = (error instanceof Error ? error.message : String(error)).slice(0, 2000);
      const delayMs = Math.min(settings.maxMs, settings.baseMs * 2 ** (row.attempts - 1));
      return { row, message, status: dead ? "dead" : "pending", error, text, delayMs };
    }
  }

  /**
   * Records outcomes as they come, a group per statement, one statement at a time: the outcomes
   * that arrive while one runs go in the next. A delivery that hangs holds back no other's record,
   * and a batch whose deliveries end together is recorded in one statement. Once a statement
   * fails, `failure` holds its error and nothing more is recorded (those events come back when
   * their lease ends, to be delivered again).
   */
  function recorder(physical: Database<Client>, report: RelayDatabaseReport, turn: Turn) {
    const db = physical.client as unknown as Raw;
    const waiting: Outcome[] = [];
    let flushing: Promise<void> | undefined;
    const state = { failure: undefined as unknown };
    const settled = (outcome: Outcome) => {
      if (outcome.status === "delivered") report.delivered++;
      else if (outcome.status === "pending") report.retried++;
      else {
        report.dead++;
        const { row, message, error, text } = outcome;
        settings.logger.warn(
          `[shardkit] outbox event ${row.id} (${row.topic}) is dead after ${row.attempts} attempts: ${text.slice(0, 200)}`,
        );
        settings.onDead?.(message, error);
        deadLetters?.add(1, { "shardkit.relay.topic": row.topic, [ATTR.database]: physical.name });
      }
    };
    async function flush() {
      // The deliveries that end in the same turn of the event loop (a fast consumer) go together.
      await new Promise((resolve) => setImmediate(resolve));
      while (waiting.length > 0 && state.failure === undefined) {
        const group = waiting.splice(0);
        try {
          await bounded(physical, () =>
            db.$executeRawUnsafe(
              RECORD,
              group.map((o) => o.row.id),
              group.map((o) => o.row.attempts),
              group.map((o) => o.status),
              group.map((o) => o.text),
              group.map((o) => o.delayMs),
            ),
          );
        } catch (error) {
          state.failure = error;
          break;
        }
        turn.progress();
        for (const outcome of group) settled(outcome);
      }
      flushing = undefined;
    }
    return {
      state,
      add(outcome: Outcome) {
        waiting.push(outcome);
        flushing ??= flush();
      },
      /** Waits for every outcome added to be recorded; throws the error of a statement that failed. */
      async drained() {
        while (flushing) await flushing;
        if (state.failure !== undefined) throw state.failure;
      },
    };
  }

  async function poll(physical: Database<Client>, turn: Turn): Promise<RelayDatabaseReport> {
    const report: RelayDatabaseReport = { ...whose(physical), claimed: 0, delivered: 0, retried: 0, dead: 0 };
    const db = physical.client as unknown as Raw;
    const leaseEnds = Date.now() + settings.leaseMs;
    const rows = await bounded(physical, () =>
      db.$queryRawUnsafe<Row[]>(
        CLAIM,
        settings.batchSize,
        settings.leaseMs,
        physical.shards.map((shard) => shard.bits),
      ),
    );
    turn.progress();
    report.claimed = rows.length;
    lagHistogram?.record(
      rows.length > 0 ? Math.max(0, Date.now() - new Date(rows[0]!.createdAt).getTime()) : 0,
      { [ATTR.database]: physical.name },
    );
    // One lane per aggregate: its events are delivered in order, and lanes run side by side (each
    // delivery in one of the relay's `deliveryConcurrency` turns), so an event whose consumer waits
    // on a slow or frozen database holds up only its own aggregate, never the rest of the batch.
    const lanes = new Map<string, Row[]>();
    for (const row of rows) {
      const lane = lanes.get(row.aggregateId);
      if (lane) lane.push(row);
      else lanes.set(row.aggregateId, [row]);
    }
    const queue = [...lanes.values()];
    const released: Row[] = [];
    const outcomes = recorder(physical, report, turn);
    const work = async () => {
      for (let lane = queue.shift(); lane; lane = queue.shift()) {
        for (const [i, row] of lane.entries()) {
          const delivery = await turns.deliveries.take();
          // Outcomes that cannot be recorded would be delivered again: deliver no more (the lease
          // brings the rest back). No time left to deliver within the lease: let the rest be
          // claimed again at once.
          if (outcomes.state.failure !== undefined) return delivery.release();
          if (Date.now() + settings.deliveryTimeoutMs > leaseEnds) {
            delivery.release();
            released.push(...lane.slice(i));
            break;
          }
          const outcome = await attempt(physical, row).finally(delivery.release);
          turn.progress();
          outcomes.add(outcome);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(settings.deliveryConcurrency, queue.length) }, work));
    await outcomes.drained();
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

  /**
   * Polls `physical` in its turn (see `Turns.take` for when a stalled poll gives it up), unless
   * `wanted()` says no when the turn comes (the relay stopped meanwhile): then `undefined`.
   */
  return async function pollDatabase(physical: Database<Client>, wanted = () => true) {
    const turn = await turns.polls.take(settings.stallMs);
    try {
      return wanted() ? await poll(physical, turn) : undefined;
    } finally {
      turn.release();
    }
  };
}
