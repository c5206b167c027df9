export {
  type ConsumeEventsOptions,
  type ConsumerStats,
  consumeEvents,
  decodeEvent,
  type EventConsumer,
  type ReceivedEvent,
  type ShardTransactions,
} from "./consume.js";
export {
  BrokerUnavailableError,
  InvalidEventMessageError,
  InvalidSubjectError,
  isShardkitError,
  JetStreamSetupError,
  NatsError,
  type NatsErrorByCode,
  type NatsErrorCode,
  NatsOptionsError,
  NoStreamError,
  PublishRejectedError,
  PublishTimeoutError,
} from "./errors.js";
export {
  EVENT_HEADERS,
  isRetryableDelivery,
  type JetStreamDeliver,
  type JetStreamSinkOptions,
  jetStreamSink,
  type PublishReceipt,
} from "./sink.js";
export { type EnsureStreamOptions, ensureStream } from "./stream.js";
