import { describe, expectTypeOf, it } from "vitest";
import {
  type IdErrorByCode,
  type IdErrorCode,
  type InvalidShardError,
  type InvalidShardedIdError,
  isShardkitError,
  type ShardkitError,
  type ShardkitGuard,
} from "./index.js";

declare const err: unknown;

describe("errors", () => {
  it("IdErrorByCode covers every code, and each class has its one literal code", () => {
    expectTypeOf<keyof IdErrorByCode>().toEqualTypeOf<IdErrorCode>();
    expectTypeOf<IdErrorByCode["INVALID_SHARD"]>().toEqualTypeOf<InvalidShardError>();
    expectTypeOf<IdErrorByCode["INVALID_SHARDED_ID"]>().toEqualTypeOf<InvalidShardedIdError>();
    expectTypeOf<InvalidShardError["code"]>().toEqualTypeOf<"INVALID_SHARD">();
    expectTypeOf<InvalidShardedIdError["code"]>().toEqualTypeOf<"INVALID_SHARDED_ID">();
  });

  it("isShardkitError narrows to ShardkitError with the code it checked", () => {
    if (isShardkitError(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
    if (isShardkitError(err, "INVALID_SHARD")) expectTypeOf(err.code).toEqualTypeOf<"INVALID_SHARD">();
  });
});

// Every package declares its guard as `ShardkitGuard<ItsErrorByCode>` (the packages' type tests check
// that it is exactly that type): how that type narrows is checked here, once.
describe("ShardkitGuard, each package's isShardkitError", () => {
  const guard: ShardkitGuard<IdErrorByCode> = isShardkitError;

  it("a code of the package narrows to that code's class, a union of codes to the union of their classes", () => {
    if (guard(err, "INVALID_SHARD")) {
      expectTypeOf(err).toEqualTypeOf<InvalidShardError>();
      expectTypeOf(err.code).toEqualTypeOf<"INVALID_SHARD">();
    }
    if (guard(err, "INVALID_SHARDED_ID")) expectTypeOf(err.value).toEqualTypeOf<unknown>();
    const code = "INVALID_SHARD" as IdErrorCode;
    if (guard(err, code)) expectTypeOf(err).toEqualTypeOf<InvalidShardError | InvalidShardedIdError>();
  });

  it("no code, a code of another package, or a code only known as a string, narrows to ShardkitError", () => {
    if (guard(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
    if (guard(err, "UNKNOWN_SHARD")) expectTypeOf(err).toEqualTypeOf<ShardkitError<"UNKNOWN_SHARD">>();
    const dynamic = "INVALID_SHARD" as string;
    if (guard(err, dynamic)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
  });

  it("is call-compatible with @shardkit/id's guard", () => {
    expectTypeOf(guard).toBeCallableWith(err);
    expectTypeOf(guard).toBeCallableWith(err, "INVALID_SHARD");
    expectTypeOf(guard).toBeCallableWith(err, "ANY_CODE");
    expectTypeOf(isShardkitError).toBeCallableWith(err, "INVALID_SHARD");
  });
});
