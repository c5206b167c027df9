import { describe, expectTypeOf, it } from "vitest";
import {
  type IdErrorByCode,
  type IdErrorCode,
  type InvalidShardError,
  type InvalidShardedIdError,
  isShardkitError,
  type ShardkitError,
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
