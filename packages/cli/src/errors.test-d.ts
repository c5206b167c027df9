import type { ShardkitGuard } from "@shardkit/id";
import type { ErrorTypeRules, ErrorTypeRulesKept } from "@shardkit/vitest-config/errors";
import { expectTypeOf, test } from "vitest";
import * as errors from "./index.js";

declare const err: unknown;

test("the errors keep the rules (every code, one class per code, one base, the guard of @shardkit/id's type)", () => {
  expectTypeOf<
    ErrorTypeRules<
      typeof errors,
      errors.CliErrorByCode,
      errors.CliError,
      ShardkitGuard<errors.CliErrorByCode>
    >
  >().toEqualTypeOf<ErrorTypeRulesKept>();
  if (errors.isShardkitError(err, "INVALID_USAGE")) expectTypeOf(err.issues).toEqualTypeOf<string[]>();
  if (errors.isShardkitError(err, "INVALID_SAMPLE_FILE"))
    expectTypeOf(err.line).toEqualTypeOf<number | undefined>();
});
