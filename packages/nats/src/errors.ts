import { isShardkitError as isAnyShardkitError, ShardkitError, type ShardkitGuard } from "@shardkit/id";

/** Error codes raised by @shardkit/nats; each is thrown by exactly one class. */
export type NatsErrorCode = keyof NatsErrorByCode;

/**
 * Base class of every error @shardkit/nats throws (a `ShardkitError` with a typed code): one
 * subclass per code (see {@link NatsErrorByCode}). Throw the subclasses; this class is not meant to
 * be constructed directly.
 */
export class NatsError<Code extends NatsErrorCode = NatsErrorCode> extends ShardkitError<Code> {}

/**
 * `PUBLISH_TIMEOUT`: JetStream did not acknowledge a publish within `timeoutMs`. The server may
 * be down, reconnecting or slow, or it stored the message and its ack was lost: the relay retries,
 * and the retry carries the same `Nats-Msg-Id`, so a message that was stored is not stored again
 * (within the stream's duplicate window). Retryable.
 */
export class PublishTimeoutError extends NatsError<"PUBLISH_TIMEOUT"> {
  readonly subject: string;
  readonly eventId: string;
  constructor(subject: string, eventId: string, timeoutMs: number, options?: { cause?: unknown }) {
    super(
      "PUBLISH_TIMEOUT",
      `JetStream did not acknowledge event ${eventId} on ${subject} within ${timeoutMs} ms`,
      options,
    );
    this.subject = subject;
    this.eventId = eventId;
  }
}

/** `BROKER_UNAVAILABLE`: the NATS connection is closed or draining, or lost its server. Retryable. */
export class BrokerUnavailableError extends coded("BROKER_UNAVAILABLE") {}

/**
 * `NO_STREAM`: no JetStream stream captures the subject (the server answered "no responders"), or
 * JetStream is not enabled, or not ready yet after a restart. Retryable: the events wait in the
 * outbox (`relay.lag()` shows them) until a stream captures the subject.
 */
export class NoStreamError extends NatsError<"NO_STREAM"> {
  readonly subject: string;
  constructor(subject: string, options?: { cause?: unknown }) {
    super(
      "NO_STREAM",
      `no JetStream stream captures subject ${subject} (or JetStream is not enabled on the server)`,
      options,
    );
    this.subject = subject;
  }
}

/**
 * `PUBLISH_REJECTED`: JetStream refused the message (larger than the stream's or server's limit,
 * captured by another stream than `stream`, the stream full with `discard: new`, ...). Not
 * retryable: after the relay's `maxAttempts` the event is a dead letter (`relay.redrive` puts it
 * back once the cause is fixed). `apiCode` is JetStream's error code when it gave one.
 */
export class PublishRejectedError extends NatsError<"PUBLISH_REJECTED"> {
  readonly subject: string;
  readonly eventId: string;
  readonly apiCode: number | undefined;
  constructor(
    subject: string,
    eventId: string,
    reason: string,
    options?: { cause?: unknown; apiCode?: number },
  ) {
    super("PUBLISH_REJECTED", `JetStream rejected event ${eventId} on ${subject}: ${reason}`, options);
    this.subject = subject;
    this.eventId = eventId;
    this.apiCode = options?.apiCode;
  }
}

/** `INVALID_SUBJECT`: the subject made for an event is not a valid NATS subject to publish to. */
export class InvalidSubjectError extends NatsError<"INVALID_SUBJECT"> {
  readonly subject: string;
  constructor(subject: string, why: string) {
    super("INVALID_SUBJECT", `${JSON.stringify(subject)} is not a subject to publish to: ${why}`);
    this.subject = subject;
  }
}

/** `INVALID_NATS_OPTIONS`: options that cannot work; every problem is listed. */
export class NatsOptionsError extends NatsError<"INVALID_NATS_OPTIONS"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("INVALID_NATS_OPTIONS", `Invalid options:\n${issues.map((i) => `  - ${i}`).join("\n")}`);
    this.issues = issues;
  }
}

/**
 * `INVALID_EVENT_MESSAGE`: a message on the stream is not an outbox event published by
 * `jetStreamSink` (a header missing or malformed, a body that is not JSON). `consumeEvents`
 * terminates such a message (no redelivery) and reports it to `onError`.
 */
export class InvalidEventMessageError extends NatsError<"INVALID_EVENT_MESSAGE"> {
  readonly subject: string;
  readonly streamSequence: number | undefined;
  constructor(subject: string, why: string, options?: { cause?: unknown; streamSequence?: number }) {
    super("INVALID_EVENT_MESSAGE", `message on ${subject} is not an outbox event: ${why}`, options);
    this.subject = subject;
    this.streamSequence = options?.streamSequence;
  }
}

/** `JETSTREAM_SETUP`: a stream or a durable consumer could not be created, read or updated. */
export class JetStreamSetupError extends coded("JETSTREAM_SETUP") {}

/** Which class throws which code: each code of @shardkit/nats is thrown by exactly one class. */
export interface NatsErrorByCode {
  PUBLISH_TIMEOUT: PublishTimeoutError;
  BROKER_UNAVAILABLE: BrokerUnavailableError;
  NO_STREAM: NoStreamError;
  PUBLISH_REJECTED: PublishRejectedError;
  INVALID_SUBJECT: InvalidSubjectError;
  INVALID_NATS_OPTIONS: NatsOptionsError;
  INVALID_EVENT_MESSAGE: InvalidEventMessageError;
  JETSTREAM_SETUP: JetStreamSetupError;
}

/**
 * True for any shardkit error, from this copy of the package or another one (it checks a global
 * mark and the code, not the class: it is `isShardkitError` of `@shardkit/id`). With a code of
 * this package it narrows to that code's class, e.g. `if (isShardkitError(err, "PUBLISH_REJECTED"))
 * err.apiCode`; with any other code, or none, to `ShardkitError`.
 */
export const isShardkitError: ShardkitGuard<NatsErrorByCode> = isAnyShardkitError;

/** A short description of a thrown value for messages. */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The `name` of a thrown value, for recognising the NATS client's errors across copies of it. */
export function errorName(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined;
}

/** The class of one code whose errors carry a message and a cause: `class X extends coded("CODE") {}`. */
type Coded<C extends NatsErrorCode> = new (message: string, options?: ErrorOptions) => NatsError<C>;
function coded<C extends NatsErrorCode>(code: C): Coded<C> {
  return class extends NatsError<C> {
    constructor(message: string, options?: ErrorOptions) {
      super(code, message, options);
    }
  };
}
