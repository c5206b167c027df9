import { isShardkitError as isAnyShardkitError, type ShardkitError } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import {
  InvalidCursorError,
  type InvalidScatterOptionsError,
  isShardkitError,
  type MissingTarget,
  type ScatterAbortedError,
  type ScatterDeadlineError,
  ScatterError,
  type ScatterErrorByCode,
  type ScatterErrorCode,
  ScatterFailedError,
  type UnsortableValueError,
  type UnsortedInputError,
} from "./index.js";

declare const err: unknown;

describe("isShardkitError narrows without casts", () => {
  it("a scatter code narrows to that code's class", () => {
    if (isShardkitError(err, "TARGETS_FAILED")) {
      expectTypeOf(err).toEqualTypeOf<ScatterFailedError>();
      expectTypeOf(err.missing).toEqualTypeOf<readonly MissingTarget[]>();
      expectTypeOf(err.code).toEqualTypeOf<"TARGETS_FAILED">();
    }
    if (isShardkitError(err, "DEADLINE_EXCEEDED")) expectTypeOf(err).toEqualTypeOf<ScatterDeadlineError>();
    if (isShardkitError(err, "ABORTED")) expectTypeOf(err).toEqualTypeOf<ScatterAbortedError>();
    if (isShardkitError(err, "INVALID_CURSOR")) expectTypeOf(err).toEqualTypeOf<InvalidCursorError>();
    if (isShardkitError(err, "INVALID_OPTIONS"))
      expectTypeOf(err).toEqualTypeOf<InvalidScatterOptionsError>();
    if (isShardkitError(err, "UNSORTED_INPUT")) expectTypeOf(err).toEqualTypeOf<UnsortedInputError>();
    if (isShardkitError(err, "UNSORTABLE_VALUE")) expectTypeOf(err).toEqualTypeOf<UnsortableValueError>();
  });

  it("a union of scatter codes narrows to the union of their classes", () => {
    const code = "ABORTED" as "TARGETS_FAILED" | "ABORTED";
    if (isShardkitError(err, code)) {
      expectTypeOf(err).toEqualTypeOf<ScatterFailedError | ScatterAbortedError>();
      expectTypeOf(err.missing).toEqualTypeOf<readonly MissingTarget[]>();
    }
  });

  it("no code, or a code of another package, narrows to ShardkitError", () => {
    if (isShardkitError(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
    if (isShardkitError(err, "UNKNOWN_SHARD"))
      expectTypeOf(err).toEqualTypeOf<ShardkitError<"UNKNOWN_SHARD">>();
    const dynamic = "INVALID_CURSOR" as string;
    if (isShardkitError(err, dynamic)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
  });

  it("is call-compatible with @shardkit/id's guard", () => {
    expectTypeOf(isShardkitError).toBeCallableWith(err);
    expectTypeOf(isShardkitError).toBeCallableWith(err, "TARGETS_FAILED");
    expectTypeOf(isShardkitError).toBeCallableWith(err, "ANY_CODE");
    expectTypeOf(isAnyShardkitError).toBeCallableWith(err, "TARGETS_FAILED");
  });
});

describe("one class per code", () => {
  it("ScatterErrorByCode covers every code, and each class has its one literal code", () => {
    expectTypeOf<keyof ScatterErrorByCode>().toEqualTypeOf<ScatterErrorCode>();
    expectTypeOf<ScatterErrorByCode["TARGETS_FAILED"]>().toEqualTypeOf<ScatterFailedError>();
    expectTypeOf<ScatterFailedError["code"]>().toEqualTypeOf<"TARGETS_FAILED">();
    expectTypeOf<ScatterDeadlineError["code"]>().toEqualTypeOf<"DEADLINE_EXCEEDED">();
    expectTypeOf<ScatterAbortedError["code"]>().toEqualTypeOf<"ABORTED">();
    expectTypeOf<InvalidCursorError["code"]>().toEqualTypeOf<"INVALID_CURSOR">();
    expectTypeOf<InvalidScatterOptionsError["code"]>().toEqualTypeOf<"INVALID_OPTIONS">();
    expectTypeOf<UnsortedInputError["code"]>().toEqualTypeOf<"UNSORTED_INPUT">();
    expectTypeOf<UnsortableValueError["code"]>().toEqualTypeOf<"UNSORTABLE_VALUE">();
    expectTypeOf<ScatterError["code"]>().toEqualTypeOf<ScatterErrorCode>();
  });

  it("every class is a ScatterError and a ShardkitError; subclasses take no code", () => {
    expectTypeOf<ScatterErrorByCode[ScatterErrorCode]>().toExtend<ScatterError>();
    expectTypeOf<ScatterError>().toExtend<ShardkitError<ScatterErrorCode>>();
    expectTypeOf(new InvalidCursorError("x")).toEqualTypeOf<InvalidCursorError>();
    // @ts-expect-error the code is fixed by the class
    new ScatterFailedError("ABORTED", "x");
    // @ts-expect-error not a scatter error code
    new ScatterError("NOPE", "x");
  });
});
