import { isShardkitError as isAnyShardkitError, ShardkitError } from "@shardkit/id";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { describe, expect, it } from "vitest";
import * as errors from "./errors.js";
import { analyzeShardKey } from "./scorecard.js";
import { createShardSelector } from "./selector.js";

describe("SelectorError", () => {
  it("is a ShardkitError with a typed code, a name, issues and a cause", () => {
    const cause = new Error("root");
    const err = new errors.InvalidSelectorConfigError(["a: b"], { cause });
    expect(err).toBeInstanceOf(errors.SelectorError);
    expect(err).toBeInstanceOf(ShardkitError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("InvalidSelectorConfigError");
    expect(err.code).toBe("INVALID_SELECTOR_CONFIG");
    expect(err.message).toBe("Invalid shard selector config (1 issue):\n  - a: b");
    expect(err.cause).toBe(cause);
    expect(err.issues).toEqual(["a: b"]);
    expect(Object.isFrozen(err.issues)).toBe(true);
    expect(new errors.NoGroupMatchError("x").issues).toEqual([]);
    expect("cause" in new errors.NoGroupMatchError("x")).toBe(false);
    expect("cause" in new errors.InvalidSelectorConfigError(["a: b"])).toBe(false);
  });

  it("is recognised by isShardkitError, with and without its code", () => {
    const err = new errors.MissingRoutingKeyError("x");
    for (const guard of [errors.isShardkitError, isAnyShardkitError]) {
      expect(guard(err)).toBe(true);
      expect(guard(err, "MISSING_ROUTING_KEY")).toBe(true);
      expect(guard(err, "NO_GROUP_MATCH")).toBe(false);
    }
    expect(ShardkitError.from(err, "OTHER")).toBe(err);
  });
});

const selector = createShardSelector({
  routingKey: "tenantId",
  groups: [{ group: 0, members: [0, 1] }],
  rules: [{ when: { region: "MX" }, group: 0 }],
});

/** Every code (the Record makes the table exhaustive), its one class, and a public call that raises it. */
const byCode: ErrorTable<errors.SelectorErrorCode> = {
  INVALID_SELECTOR_CONFIG: [
    errors.InvalidSelectorConfigError,
    () => createShardSelector({ routingKey: "k", groups: [] }),
  ],
  NO_GROUP_MATCH: [errors.NoGroupMatchError, () => selector.select({ tenantId: "t", region: "US" })],
  MISSING_ROUTING_KEY: [errors.MissingRoutingKeyError, () => selector.select({ region: "MX" })],
  INVALID_ROUTING_KEY: [errors.InvalidRoutingKeyError, () => selector.select({ tenantId: {}, region: "MX" })],
  INVALID_SCORECARD_INPUT: [errors.InvalidScorecardInputError, () => analyzeShardKey([], { members: 0 })],
  INVALID_PROPERTIES: [errors.InvalidPropertiesError, () => selector.select(null as never)],
};

describeErrorRules(errors, byCode, import.meta.url);
