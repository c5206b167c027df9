import { type JetStreamClient, type JetStreamPublishOptions, jetstream } from "@nats-io/jetstream";
import { type NatsConnection, headers as natsHeaders } from "@nats-io/nats-core";
import { encodeJson, isShardUnavailable, type OutboxMessage } from "@shardkit/prisma";
import {
  BrokerUnavailableError,
  describeError,
  errorName,
  InvalidSubjectError,
  isShardkitError,
  NatsOptionsError,
  NoStreamError,
  PublishRejectedError,
  PublishTimeoutError,
} from "./errors.js";

/**
 * The headers every published event carries. `Nats-Msg-Id` is the event's ID (unique per event, a
 * ShardedUUID): JetStream drops a second message with the same ID that arrives within the
 * stream's duplicate window. The others let a consumer route and trace without reading the body.
 */
export const EVENT_HEADERS = {
  id: "Nats-Msg-Id",
  topic: "Shardkit-Topic",
  aggregateId: "Shardkit-Aggregate-Id",
  /** The shard whose transaction wrote the event, as its key ("group/member"). */
  shard: "Shardkit-Shard",
  /** When the event was written (ISO 8601). */
  createdAt: "Shardkit-Created-At",
} as const;

export interface JetStreamSinkOptions {
  /** A connection from `@nats-io/transport-node` (or any NATS v3 transport). The sink never closes it. */
  connection: NatsConnection;
  /** The subject of an event. Default `${prefix}.${message.topic}`. */
  subject?: (message: OutboxMessage) => string;
  /** The first token(s) of the default subject. Default `"outbox"`. */
  prefix?: string;
  /**
   * The stream that must store the events: a publish captured by another stream (or none) is
   * rejected instead of stored elsewhere. Default: any stream that captures the subject.
   */
  stream?: string;
  /**
   * How long to wait for JetStream's publish ack. Default 5,000 ms. Keep it below the relay's
   * `deliveryTimeoutMs` (default 10 s), so the sink reports a timeout before the relay gives up.
   */
  timeoutMs?: number;
  /**
   * Called with JetStream's answer for each event it acknowledged, before `deliver` resolves (for
   * metrics: `receipt.duplicate` counts the relay's redeliveries that the stream absorbed).
   */
  onPublished?(message: OutboxMessage, receipt: PublishReceipt): void;
}

/** What JetStream answered for one delivered event. */
export interface PublishReceipt {
  subject: string;
  /** The stream that stored it. */
  stream: string;
  /** Its sequence in the stream (for a duplicate: the sequence of the copy stored first). */
  seq: number;
  /** True when the stream already held this event (same `Nats-Msg-Id` within its duplicate window). */
  duplicate: boolean;
}

/** A `deliver` function for `createOutboxRelay`. */
export type JetStreamDeliver = (message: OutboxMessage, context?: { signal?: AbortSignal }) => Promise<void>;

/** Why a subject cannot be published to, or undefined when it can. */
export function invalidSubject(subject: string): string | undefined {
  if (typeof subject !== "string" || subject.length === 0) return "it is empty";
  if (/[\s\p{Cc}]/u.test(subject)) return "it contains whitespace or a control character";
  const tokens = subject.split(".");
  if (tokens.some((t) => t.length === 0)) return "it has an empty token (a leading, trailing or double dot)";
  if (tokens.some((t) => t === "*" || t === ">")) return "it has a wildcard token (* or >)";
  return undefined;
}

/**
 * A relay sink for NATS JetStream: `createOutboxRelay({ registry, deliver: jetStreamSink({ connection }),
 * retryable: isRetryableDelivery })`. Each event is published with its ID as `Nats-Msg-Id`, the
 * headers of {@link EVENT_HEADERS} and its payload as JSON, and the call resolves only once
 * JetStream acknowledges that a stream stored it. A failed or timed-out ack throws (a
 * `NatsError`), so the relay keeps the event pending and retries it; an ack reporting a duplicate
 * (the relay delivered the event again) resolves like any other (`onPublished` sees which).
 */
export function jetStreamSink(options: JetStreamSinkOptions): JetStreamDeliver {
  const issues: string[] = [];
  const connection = options?.connection;
  if (!connection || typeof (connection as { request?: unknown }).request !== "function") {
    issues.push("connection must be a NatsConnection (connect() of @nats-io/transport-node)");
  }
  const prefix = options?.prefix ?? "outbox";
  const prefixWhy = invalidSubject(prefix);
  if (prefixWhy) issues.push(`prefix ${JSON.stringify(prefix)} is not a subject: ${prefixWhy}`);
  const timeoutMs = options?.timeoutMs ?? 5000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    issues.push(
      `timeoutMs must be a positive number of milliseconds, got ${JSON.stringify(options.timeoutMs)}`,
    );
  }
  if (options?.stream !== undefined && !/^[^\s.*>]+$/.test(options.stream)) {
    issues.push(`stream ${JSON.stringify(options.stream)} is not a stream name`);
  }
  if (options?.subject !== undefined && typeof options.subject !== "function") {
    issues.push("subject must be a function (message) => string");
  }
  if (options?.onPublished !== undefined && typeof options.onPublished !== "function") {
    issues.push("onPublished must be a function (message, receipt) => void");
  }
  if (issues.length > 0) throw new NatsOptionsError(issues);
  const subjectOf = options.subject ?? ((message: OutboxMessage) => `${prefix}.${message.topic}`);
  let js: JetStreamClient | undefined;

  return async function deliver(message: OutboxMessage): Promise<void> {
    const subject = subjectOf(message);
    const why = invalidSubject(subject);
    if (why) throw new InvalidSubjectError(subject, why);
    if (connection.isClosed()) {
      throw new BrokerUnavailableError(
        `the NATS connection is closed: event ${message.id} was not published`,
      );
    }
    const headers = natsHeaders();
    headers.set(EVENT_HEADERS.topic, message.topic);
    headers.set(EVENT_HEADERS.aggregateId, message.aggregateId);
    headers.set(EVENT_HEADERS.shard, message.shard.key);
    headers.set(EVENT_HEADERS.createdAt, message.createdAt.toISOString());
    headers.set("Content-Type", "application/json");
    const publishOptions: Partial<JetStreamPublishOptions> = {
      msgID: message.id,
      headers,
      timeout: timeoutMs,
    };
    if (options.stream !== undefined) publishOptions.expect = { streamName: options.stream };
    js ??= jetstream(connection, { timeout: timeoutMs });
    let receipt: PublishReceipt;
    try {
      const ack = await js.publish(subject, encodeJson(message.payload), publishOptions);
      receipt = { subject, stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
    } catch (error) {
      throw publishError(error, subject, message.id, timeoutMs);
    }
    options.onPublished?.(message, receipt);
  };
}

/** The NATS client's error for one publish, as this package's error (by name: any copy of the client). */
function publishError(error: unknown, subject: string, eventId: string, timeoutMs: number): Error {
  const cause = { cause: error };
  switch (errorName(error)) {
    case "TimeoutError":
      return new PublishTimeoutError(subject, eventId, timeoutMs, cause);
    case "JetStreamNotEnabled":
    case "NoResponders":
    case "NoRespondersError":
      return new NoStreamError(subject, cause);
    case "ClosedConnectionError":
    case "DrainingConnectionError":
    case "ConnectionError":
      return new BrokerUnavailableError(
        `event ${eventId} was not published on ${subject}: ${describeError(error)}`,
        cause,
      );
    case "InvalidSubjectError":
      return new InvalidSubjectError(subject, describeError(error));
    default: {
      const apiCode = (error as { code?: unknown }).code;
      return new PublishRejectedError(subject, eventId, describeError(error), {
        cause: error,
        ...(typeof apiCode === "number" ? { apiCode } : {}),
      });
    }
  }
}

/**
 * The relay's `retryable` for a JetStream sink: a failure that retrying can fix is retried however
 * many attempts it takes, never dead-lettered. That is the relay's own default (a shard that is
 * unavailable, a delivery that timed out) plus the broker being unreachable, not answering in
 * time, or having no stream for the subject yet. A rejection of the message itself
 * (`PUBLISH_REJECTED`, `INVALID_SUBJECT`) is not: it becomes a dead letter after `maxAttempts`.
 */
export function isRetryableDelivery(error: unknown): boolean {
  return (
    isShardkitError(error, "PUBLISH_TIMEOUT") ||
    isShardkitError(error, "BROKER_UNAVAILABLE") ||
    isShardkitError(error, "NO_STREAM") ||
    isShardUnavailable(error) ||
    // the relay's own timeout of a delivery (deliveryTimeoutMs)
    errorName(error) === "DeliveryTimeout"
  );
}
