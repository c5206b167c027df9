import type { ShardkitGuard } from "@shardkit/id";
import type { ErrorTypeRules, ErrorTypeRulesKept } from "@shardkit/vitest-config/errors";
import { describe, expectTypeOf, it } from "vitest";
import * as errors from "./index.js";

type ByCode = errors.SelectorErrorByCode;
type Rules = ErrorTypeRules<typeof errors, ByCode, errors.SelectorError, ShardkitGuard<ByCode>>;
declare const err: unknown;

describe("errors", () => {
  it("keep the rules: every code, one class per code, one base, the guard of @shardkit/id's type", () => {
    expectTypeOf<Rules>().toEqualTypeOf<ErrorTypeRulesKept>();
    // @ts-expect-error the base class's constructor is protected: throw the code's class
    new errors.SelectorError("NO_GROUP_MATCH", "x");
    // @ts-expect-error the code is fixed by the class
    new errors.NoGroupMatchError("MISSING_ROUTING_KEY", "x");
  });

  it("a selector code narrows to its class without casts: the config's issues", () => {
    if (errors.isShardkitError(err, "INVALID_SELECTOR_CONFIG"))
      expectTypeOf(err.issues).toEqualTypeOf<readonly string[]>();
  });
});
