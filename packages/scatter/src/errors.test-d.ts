import type { ShardkitGuard } from "@shardkit/id";
import type { ErrorTypeRules, ErrorTypeRulesKept } from "@shardkit/vitest-config/errors";
import { describe, expectTypeOf, it } from "vitest";
import * as errors from "./index.js";

type ByCode = errors.ScatterErrorByCode;
declare const err: unknown;

describe("errors", () => {
  it("keep the rules: every code, one class per code, one base, the guard of @shardkit/id's type", () => {
    expectTypeOf<
      ErrorTypeRules<typeof errors, ByCode, errors.ScatterError, ShardkitGuard<ByCode>>
    >().toEqualTypeOf<ErrorTypeRulesKept>();
    expectTypeOf(new errors.InvalidCursorError("x")).toEqualTypeOf<errors.InvalidCursorError>();
    // @ts-expect-error the code is fixed by the class
    new errors.ScatterFailedError("ABORTED", "x");
    // @ts-expect-error not a scatter error code
    new errors.ScatterError("NOPE", "x");
  });

  it("scatter codes narrow to their classes without casts: the missing targets", () => {
    const code = "ABORTED" as "TARGETS_FAILED" | "ABORTED";
    if (errors.isShardkitError(err, code)) {
      expectTypeOf(err).toEqualTypeOf<errors.ScatterFailedError | errors.ScatterAbortedError>();
      expectTypeOf(err.missing).toEqualTypeOf<readonly errors.MissingTarget[]>();
    }
  });
});
