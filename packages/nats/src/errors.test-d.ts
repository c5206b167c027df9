import { isShardkitError as isAnyShardkitError, type ShardkitError } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import {
  type BrokerUnavailableError,
  type InvalidEventMessageError,
  type InvalidSubjectError,
  isShardkitError,
  type JetStreamSetupError,
  NatsError,
  type NatsErrorByCode,
  type NatsErrorCode,
  type NatsOptionsError,
  type NoStreamError,
  type PublishRejectedError,
  type PublishTimeoutError,
} from "./index.js";

declare const err: unknown;

describe("isShardkitError narrows without casts", () => {
  it("a code of this package narrows to that code's class", () => {
    if (isShardkitError(err, "PUBLISH_REJECTED")) {
      expectTypeOf(err).toEqualTypeOf<PublishRejectedError>();
      expectTypeOf(err.apiCode).toEqualTypeOf<number | undefined>();
      expectTypeOf(err.code).toEqualTypeOf<"PUBLISH_REJECTED">();
    }
    if (isShardkitError(err, "PUBLISH_TIMEOUT")) expectTypeOf(err).toEqualTypeOf<PublishTimeoutError>();
    if (isShardkitError(err, "BROKER_UNAVAILABLE")) expectTypeOf(err).toEqualTypeOf<BrokerUnavailableError>();
    if (isShardkitError(err, "NO_STREAM")) expectTypeOf(err).toEqualTypeOf<NoStreamError>();
    if (isShardkitError(err, "INVALID_SUBJECT")) expectTypeOf(err).toEqualTypeOf<InvalidSubjectError>();
    if (isShardkitError(err, "INVALID_NATS_OPTIONS")) expectTypeOf(err).toEqualTypeOf<NatsOptionsError>();
    if (isShardkitError(err, "INVALID_EVENT_MESSAGE"))
      expectTypeOf(err).toEqualTypeOf<InvalidEventMessageError>();
    if (isShardkitError(err, "JETSTREAM_SETUP")) expectTypeOf(err).toEqualTypeOf<JetStreamSetupError>();
  });

  it("no code, or a code of another package, narrows to ShardkitError", () => {
    if (isShardkitError(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
    if (isShardkitError(err, "UNKNOWN_SHARD"))
      expectTypeOf(err).toEqualTypeOf<ShardkitError<"UNKNOWN_SHARD">>();
  });

  it("is call-compatible with @shardkit/id's guard", () => {
    expectTypeOf(isShardkitError).toBeCallableWith(err, "NO_STREAM");
    expectTypeOf(isAnyShardkitError).toBeCallableWith(err, "NO_STREAM");
  });
});

describe("one class per code", () => {
  it("NatsErrorByCode covers every code; each class has its one literal code and extends the base", () => {
    expectTypeOf<keyof NatsErrorByCode>().toEqualTypeOf<NatsErrorCode>();
    expectTypeOf<NatsErrorByCode[NatsErrorCode]>().toExtend<NatsError>();
    expectTypeOf<NatsError>().toExtend<ShardkitError<NatsErrorCode>>();
    expectTypeOf<PublishRejectedError["code"]>().toEqualTypeOf<"PUBLISH_REJECTED">();
    // @ts-expect-error not a code of this package
    new NatsError("NOPE", "x");
  });
});
