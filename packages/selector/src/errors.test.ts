import { isShardkitError, ShardkitError } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { SelectorError } from "./errors.js";

describe("SelectorError", () => {
  it("is a ShardkitError with a typed code, a name, issues and a cause", () => {
    const cause = new Error("root");
    const err = new SelectorError("INVALID_CONFIG", "bad", { cause, issues: ["a: b"] });
    expect(err).toBeInstanceOf(ShardkitError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("SelectorError");
    expect(err.code).toBe("INVALID_CONFIG");
    expect(err.cause).toBe(cause);
    expect(err.issues).toEqual(["a: b"]);
    expect(Object.isFrozen(err.issues)).toBe(true);
    expect(new SelectorError("NO_GROUP_MATCH", "x").issues).toEqual([]);
    expect("cause" in new SelectorError("NO_GROUP_MATCH", "x")).toBe(false);
  });

  it("is recognised by isShardkitError, with and without its code", () => {
    const err = new SelectorError("MISSING_ROUTING_KEY", "x");
    expect(isShardkitError(err)).toBe(true);
    expect(isShardkitError(err, "MISSING_ROUTING_KEY")).toBe(true);
    expect(isShardkitError(err, "NO_GROUP_MATCH")).toBe(false);
    expect(ShardkitError.from(err, "OTHER")).toBe(err);
  });
});
