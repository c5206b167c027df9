import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { type MsgHdrs, type NatsConnection, nanos } from "@nats-io/nats-core";
import { ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import { consumeOnce, decodeJson, type ShardRef } from "@shardkit/prisma";
import { orAfter } from "@shardkit/prisma/internal";
import {
  describeError,
  errorName,
  InvalidEventMessageError,
  JetStreamSetupError,
  NatsOptionsError,
} from "./errors.js";
import { EVENT_HEADERS } from "./sink.js";

/** An outbox event as a consumer receives it from the stream. */
export interface ReceivedEvent<Payload = unknown> {
  /** The event's ID (its `Nats-Msg-Id`): the key `consumeOnce` records. */
  id: string;
  topic: string;
  aggregateId: string;
  payload: Payload;
  createdAt: Date;
  /** The shard whose transaction wrote it. */
  shard: ShardIdentifier;
  subject: string;
  /** Its sequence in the stream: two copies of one event (a redelivery by the relay) have two. */
  streamSequence: number;
  /** How many times NATS has delivered this copy (1 the first time). */
  deliveryCount: number;
}

type Received = Pick<JsMsg, "subject" | "headers" | "data"> & {
  info?: { streamSequence: number; deliveryCount: number };
};

const text = new TextDecoder();
/** How long `stop()` waits for the server to take the last acks. */
const FLUSH_TIMEOUT_MS = 5000;

/**
 * The outbox event a JetStream message carries (as `jetStreamSink` published it). Throws
 * `InvalidEventMessageError` for a message without the event headers, with an ID that is not a
 * ShardedUUID, or with a body that is not JSON.
 */
export function decodeEvent<Payload = unknown>(msg: Received): ReceivedEvent<Payload> {
  const seq = msg.info?.streamSequence;
  const fail = (why: string, cause?: unknown): never => {
    throw new InvalidEventMessageError(msg.subject, why, {
      ...(cause === undefined ? {} : { cause }),
      ...(seq === undefined ? {} : { streamSequence: seq }),
    });
  };
  const headers: MsgHdrs | undefined = msg.headers;
  const header = (name: string) => headers?.get(name) || fail(`no ${name} header`);
  const id = header(EVENT_HEADERS.id);
  if (!ShardedUUID.isValid(id)) fail(`${EVENT_HEADERS.id} ${JSON.stringify(id)} is not a ShardedUUID`);
  const shard = ShardedUUID.shardOf(id);
  const shardKey = headers?.get(EVENT_HEADERS.shard);
  if (shardKey && shardKey !== shard.key) {
    fail(`${EVENT_HEADERS.shard} ${shardKey} is not the shard of event ${id} (${shard.key})`);
  }
  const createdAt = new Date(header(EVENT_HEADERS.createdAt));
  if (Number.isNaN(createdAt.getTime())) fail(`${EVENT_HEADERS.createdAt} is not a date`);
  let payload: Payload;
  try {
    payload = decodeJson<Payload>(text.decode(msg.data));
  } catch (error) {
    return fail("its body is not JSON", error);
  }
  return {
    id,
    topic: header(EVENT_HEADERS.topic),
    aggregateId: header(EVENT_HEADERS.aggregateId),
    payload,
    createdAt,
    shard,
    subject: msg.subject,
    streamSequence: seq ?? 0,
    deliveryCount: msg.info?.deliveryCount ?? 1,
  };
}

/** What runs a shard transaction: a client routed by `shardRouting` (`db.$transactionOn`). */
export interface ShardTransactions<Tx> {
  $transactionOn<R>(shardOrId: ShardRef, fn: (tx: Tx) => Promise<R>): Promise<R>;
}

export interface ConsumeEventsOptions<Tx, Payload = unknown> {
  connection: NatsConnection;
  /** The stream the events are in. */
  stream: string;
  /**
   * The consumer's name: what `consumeOnce` records applied events under, and the durable consumer
   * on the stream (unless `durable` names another).
   */
  consumer: string;
  /**
   * The durable pull consumer on the stream, default `consumer`. Created when it does not exist
   * (explicit acks, from the stream's first message, redelivered without limit); an existing one
   * is used as it is configured.
   */
  durable?: string;
  /** Only these subjects (for a durable this creates). Default: the whole stream. */
  subjects?: string[];
  /** Runs the shard transaction that applies an event: the routed client. */
  db: ShardTransactions<Tx>;
  /** The shard the event's effect belongs to (or an ID on it): its transaction applies the event. */
  shardOf(event: ReceivedEvent<Payload>): ShardRef;
  /** Applies the event's effect in `tx`. Called at most once per event and consumer (`consumeOnce`). */
  apply(tx: Tx, event: ReceivedEvent<Payload>): Promise<unknown>;
  /** How long NATS waits for an ack before it redelivers (for a durable this creates). Default 30 s. */
  ackWaitMs?: number;
  /** Messages pulled ahead. Default 64. */
  batch?: number;
  /**
   * Events applied at once (each in its own transaction). Events of one aggregate are always
   * applied one after another, in the order received; `1` applies the whole stream in order.
   * Default 8.
   */
  concurrency?: number;
  /** Delay before an event that failed is redelivered: `baseMs * 2^(deliveries-1)`, capped at `maxMs`. Defaults 500 ms, 30 s. */
  retry?: { baseMs?: number; maxMs?: number };
  /** Called after each event is acked: `applied`, or `duplicate` (applied before, only acked now). */
  onEvent?(event: ReceivedEvent<Payload>, outcome: "applied" | "duplicate"): void;
  /**
   * Called when applying an event failed (it is redelivered after the retry delay), when a message
   * is not an event (`InvalidEventMessageError`; it is terminated, never redelivered), or when
   * an ack could not be sent (the event is redelivered and recognised).
   */
  onError?(error: unknown, event: ReceivedEvent<Payload> | undefined): void;
}

export interface ConsumerStats {
  /** Events applied (their effect committed) by this loop. */
  applied: number;
  /** Events received again after they were applied (by this or another process): acked only. */
  duplicates: number;
  /** Attempts that failed (each redelivered later). */
  failed: number;
  /** Messages that were not events (terminated). */
  invalid: number;
}

export interface EventConsumer {
  readonly stats: Readonly<ConsumerStats>;
  /**
   * Stops pulling, waits for the events in hand and flushes their acks. Messages pulled ahead but
   * not handled are redelivered after the ack wait.
   */
  stop(): Promise<void>;
  /** Settles when the loop ends: after `stop()`, or with the error that ended it. */
  readonly done: Promise<void>;
}

/**
 * A durable pull consumer that applies each event once into a shard database: for every message,
 * one `$transactionOn(shardOf(event))` records the event with `consumeOnce` and runs `apply`; the
 * message is acked after that transaction commits. An event received again (NATS redelivered it
 * after a lost ack or a crash between commit and ack, or the relay published it again after the
 * stream's duplicate window) finds its record, applies nothing, and is only acked. An event whose
 * transaction fails is nak'ed with a delay and redelivered. Events of one aggregate are applied
 * in order, one at a time; different aggregates side by side (`concurrency`).
 * Longer than 80 lines: one closure: its loop, stats and stop share the consumer's state.
 */
export async function consumeEvents<Tx, Payload = unknown>(
  options: ConsumeEventsOptions<Tx, Payload>,
): Promise<EventConsumer> {
  const issues: string[] = [];
  const name = options?.consumer;
  const durable = options?.durable ?? name;
  if (typeof name !== "string" || name.length === 0) issues.push("consumer must be a non-empty string");
  if (typeof durable !== "string" || !/^[^\s.*>/\\]+$/.test(durable)) {
    issues.push(`durable ${JSON.stringify(durable)} is not a consumer name (no spaces, dots, * or >)`);
  }
  if (typeof options?.stream !== "string" || options.stream.length === 0) issues.push("stream must be named");
  if (typeof options?.db?.$transactionOn !== "function") {
    issues.push("db must be a routed client (shardRouting): it runs $transactionOn");
  }
  if (typeof options?.shardOf !== "function")
    issues.push("shardOf must be a function (event) => shard or ID");
  if (typeof options?.apply !== "function") issues.push("apply must be a function (tx, event) => Promise");
  const ackWaitMs = options?.ackWaitMs ?? 30_000;
  if (!(Number.isFinite(ackWaitMs) && ackWaitMs >= 100)) issues.push("ackWaitMs must be at least 100 ms");
  const batch = options?.batch ?? 64;
  if (!(Number.isSafeInteger(batch) && batch >= 1)) issues.push("batch must be an integer >= 1");
  const concurrency = options?.concurrency ?? 8;
  if (!(Number.isSafeInteger(concurrency) && concurrency >= 1))
    issues.push("concurrency must be an integer >= 1");
  const baseMs = options?.retry?.baseMs ?? 500;
  const maxMs = options?.retry?.maxMs ?? 30_000;
  if (!(baseMs >= 0 && maxMs >= baseMs)) issues.push("retry needs 0 <= baseMs <= maxMs");
  if (issues.length > 0) throw new NatsOptionsError(issues);
  const { connection, stream, db, shardOf, apply } = options;

  try {
    const jsm = await jetstreamManager(connection);
    try {
      await jsm.consumers.info(stream, durable);
    } catch (error) {
      if (errorName(error) !== "ConsumerNotFoundError") throw error;
      const subjects = options.subjects ?? [];
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(ackWaitMs),
        max_deliver: -1,
        ...(subjects.length === 1 ? { filter_subject: subjects[0]! } : {}),
        ...(subjects.length > 1 ? { filter_subjects: subjects } : {}),
      });
    }
  } catch (error) {
    throw new JetStreamSetupError(
      `durable consumer ${durable} on stream ${stream} could not be read or created: ${describeError(error)}`,
      { cause: error },
    );
  }
  let messages: ConsumerMessages;
  try {
    const consumer = await jetstream(connection).consumers.get(stream, durable);
    messages = await consumer.consume({ max_messages: batch });
  } catch (error) {
    throw new JetStreamSetupError(
      `durable consumer ${durable} on stream ${stream} could not be consumed: ${describeError(error)}`,
      { cause: error },
    );
  }

  const stats: ConsumerStats = { applied: 0, duplicates: 0, failed: 0, invalid: 0 };
  const report = (error: unknown, event: ReceivedEvent<Payload> | undefined) => {
    try {
      options.onError?.(error, event);
    } catch {
      // a failing error callback must not stop the loop
    }
  };

  /** Applies one event in its shard transaction, then acks it; nak's it when the transaction fails. */
  async function handle(msg: JsMsg, event: ReceivedEvent<Payload>): Promise<void> {
    let applied: boolean;
    try {
      const shard = shardOf(event);
      applied = await db.$transactionOn(shard, async (tx) => {
        if (!(await consumeOnce(tx, shard, name, event.id))) return false;
        await apply(tx, event);
        return true;
      });
    } catch (error) {
      stats.failed++;
      report(error, event);
      msg.nak(Math.min(maxMs, baseMs * 2 ** Math.min(event.deliveryCount - 1, 30)));
      return;
    }
    if (applied) stats.applied++;
    else stats.duplicates++;
    // After the commit: an ack that is lost leaves a redelivery that consumeOnce recognises.
    msg.ack();
    options.onEvent?.(event, applied ? "applied" : "duplicate");
  }

  // One lane per aggregate: its events are applied one after another, in the order received;
  // lanes run side by side, at most `concurrency` events in hand at once.
  const lanes = new Map<string, Promise<void>>();
  let inHand = 0;
  let wake: (() => void) | undefined;
  function dispatch(msg: JsMsg): void {
    let event: ReceivedEvent<Payload>;
    try {
      event = decodeEvent<Payload>(msg);
    } catch (error) {
      stats.invalid++;
      report(error, undefined);
      try {
        msg.term(); // never redelivered (a reason needs NATS 2.10: onError has the error)
      } catch (termError) {
        report(termError, undefined);
      }
      return;
    }
    const lane = event.aggregateId;
    inHand++;
    const run = (lanes.get(lane) ?? Promise.resolve())
      .then(() => handle(msg, event))
      .catch((error) => report(error, event)) // an ack or callback that threw: the lane goes on
      .finally(() => {
        inHand--;
        if (lanes.get(lane) === run) lanes.delete(lane);
        wake?.();
      });
    lanes.set(lane, run);
  }

  let stopping = false;
  const done = (async () => {
    try {
      for await (const msg of messages) {
        // Messages pulled ahead but not handled are redelivered after the ack wait (to any process);
        // with its connection closed the loop could apply events it cannot ack: it ends instead.
        if (stopping || connection.isClosed()) break;
        dispatch(msg);
        while (inHand >= concurrency && !stopping) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
        if (stopping) break;
      }
    } finally {
      while (lanes.size > 0) await Promise.all([...lanes.values()]);
    }
  })();
  done.catch(() => {}); // observed through `done`; never an unhandled rejection
  let stopped: Promise<void> | undefined;
  return {
    stats,
    done,
    stop() {
      stopped ??= (async () => {
        stopping = true;
        messages.stop();
        await done.catch(() => {});
        // A server that stopped answering would hold the flush until NATS finds the connection
        // stale (minutes): the acks are sent or lost by then (a lost ack is a redelivery).
        if (!connection.isClosed())
          await orAfter(FLUSH_TIMEOUT_MS, undefined, () => connection.flush().catch(() => {}));
      })();
      return stopped;
    },
  };
}
