import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { describe, expect, it } from "vitest";
import * as errors from "./errors.js";
import { InvalidShardError, InvalidShardedIdError, isShardkitError, ShardkitError } from "./errors.js";
import { ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID } from "./sharded-uuid.js";

describe("ShardkitError", () => {
  it("carries a typed code, a name and a cause", () => {
    const cause = new Error("root");
    const err = new ShardkitError("SOME_CODE", "message", { cause });
    expect(err.code).toBe("SOME_CODE");
    expect(err.name).toBe("ShardkitError");
    expect(err.cause).toBe(cause);
    expect(new InvalidShardError("x").name).toBe("InvalidShardError");
    expect(new InvalidShardedIdError("abc", "why").message).toBe('Invalid sharded ID "abc": why');
  });

  it("isShardkitError recognises errors from another copy of the package (no shared class)", () => {
    const mark = Symbol.for("shardkit.error");
    const foreign = Object.assign(new Error("from a duplicate install"), {
      code: "INVALID_SHARD",
      [mark]: true,
    });
    expect(foreign instanceof ShardkitError).toBe(false);
    expect(isShardkitError(foreign)).toBe(true);
    expect(isShardkitError(foreign, "INVALID_SHARD")).toBe(true);
    expect(isShardkitError(foreign, "INVALID_SHARDED_ID")).toBe(false);
    expect(isShardkitError(new Error("plain"))).toBe(false);
    expect(isShardkitError(Object.assign(new Error("look-alike"), { code: "INVALID_SHARD" }))).toBe(false);
    expect(isShardkitError(null)).toBe(false);
  });

  it("from() keeps shardkit errors and wraps anything else with its cause", () => {
    const own = new InvalidShardError("x");
    expect(ShardkitError.from(own, "WRAPPED")).toBe(own);
    const wrapped = ShardkitError.from("boom", "WRAPPED");
    expect(wrapped.code).toBe("WRAPPED");
    expect(wrapped.message).toBe("boom");
    expect(wrapped.cause).toBe("boom");
  });
});

/** Every code (the Record makes the table exhaustive), its one class, and a public call that raises it. */
const byCode: ErrorTable<errors.IdErrorCode> = {
  INVALID_SHARD: [errors.InvalidShardError, () => ShardIdentifier.of(256, 0)],
  INVALID_SHARDED_ID: [errors.InvalidShardedIdError, () => ShardedUUID.shardOf("not-a-uuid")],
};

describeErrorRules(errors, byCode, import.meta.url);
