import { isShardkitError as isAnyShardkitError, type ShardkitError } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import {
  type InvalidRoutingKeyError,
  type InvalidScorecardInputError,
  type InvalidSelectorConfigError,
  isShardkitError,
  type MissingRoutingKeyError,
  NoGroupMatchError,
  SelectorError,
  type SelectorErrorByCode,
  type SelectorErrorCode,
} from "./index.js";

declare const err: unknown;

describe("isShardkitError narrows without casts", () => {
  it("a selector code narrows to that code's class", () => {
    if (isShardkitError(err, "INVALID_SELECTOR_CONFIG")) {
      expectTypeOf(err).toEqualTypeOf<InvalidSelectorConfigError>();
      expectTypeOf(err.issues).toEqualTypeOf<readonly string[]>();
      expectTypeOf(err.code).toEqualTypeOf<"INVALID_SELECTOR_CONFIG">();
    }
    if (isShardkitError(err, "NO_GROUP_MATCH")) expectTypeOf(err).toEqualTypeOf<NoGroupMatchError>();
    if (isShardkitError(err, "MISSING_ROUTING_KEY"))
      expectTypeOf(err).toEqualTypeOf<MissingRoutingKeyError>();
    if (isShardkitError(err, "INVALID_ROUTING_KEY"))
      expectTypeOf(err).toEqualTypeOf<InvalidRoutingKeyError>();
    if (isShardkitError(err, "INVALID_SCORECARD_INPUT"))
      expectTypeOf(err).toEqualTypeOf<InvalidScorecardInputError>();
  });

  it("a union of selector codes narrows to the union of their classes", () => {
    const code = "NO_GROUP_MATCH" as "NO_GROUP_MATCH" | "MISSING_ROUTING_KEY";
    if (isShardkitError(err, code))
      expectTypeOf(err).toEqualTypeOf<NoGroupMatchError | MissingRoutingKeyError>();
  });

  it("no code, or a code of another package, narrows to ShardkitError", () => {
    if (isShardkitError(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
    if (isShardkitError(err, "INVALID_CONFIG"))
      expectTypeOf(err).toEqualTypeOf<ShardkitError<"INVALID_CONFIG">>();
    const dynamic = "NO_GROUP_MATCH" as string;
    if (isShardkitError(err, dynamic)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
  });

  it("is call-compatible with @shardkit/id's guard", () => {
    expectTypeOf(isShardkitError).toBeCallableWith(err);
    expectTypeOf(isShardkitError).toBeCallableWith(err, "NO_GROUP_MATCH");
    expectTypeOf(isShardkitError).toBeCallableWith(err, "ANY_CODE");
    expectTypeOf(isAnyShardkitError).toBeCallableWith(err, "NO_GROUP_MATCH");
  });
});

describe("one class per code", () => {
  it("SelectorErrorByCode covers every code, and each class has its one literal code", () => {
    expectTypeOf<keyof SelectorErrorByCode>().toEqualTypeOf<SelectorErrorCode>();
    expectTypeOf<
      SelectorErrorByCode["INVALID_SELECTOR_CONFIG"]
    >().toEqualTypeOf<InvalidSelectorConfigError>();
    expectTypeOf<InvalidSelectorConfigError["code"]>().toEqualTypeOf<"INVALID_SELECTOR_CONFIG">();
    expectTypeOf<NoGroupMatchError["code"]>().toEqualTypeOf<"NO_GROUP_MATCH">();
    expectTypeOf<MissingRoutingKeyError["code"]>().toEqualTypeOf<"MISSING_ROUTING_KEY">();
    expectTypeOf<InvalidRoutingKeyError["code"]>().toEqualTypeOf<"INVALID_ROUTING_KEY">();
    expectTypeOf<InvalidScorecardInputError["code"]>().toEqualTypeOf<"INVALID_SCORECARD_INPUT">();
  });

  it("every class is a SelectorError; the base class cannot be thrown directly", () => {
    expectTypeOf<SelectorErrorByCode[SelectorErrorCode]>().toExtend<SelectorError>();
    expectTypeOf<SelectorError>().toExtend<ShardkitError<SelectorErrorCode>>();
    // @ts-expect-error the base class's constructor is protected: throw the code's class
    new SelectorError("NO_GROUP_MATCH", "x");
    // @ts-expect-error the code is fixed by the class
    new NoGroupMatchError("MISSING_ROUTING_KEY", "x");
  });
});
