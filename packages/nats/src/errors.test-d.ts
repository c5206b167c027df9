import type { ShardkitGuard } from "@shardkit/id";
import type { ErrorTypeRules, ErrorTypeRulesKept } from "@shardkit/vitest-config/errors";
import { expectTypeOf, test } from "vitest";
import * as errors from "./index.js";

declare const err: unknown;

test("the errors keep the rules (every code, one class per code, one base, the guard of @shardkit/id's type), and JetStream's code is kept", () => {
  if (errors.isShardkitError(err, "PUBLISH_REJECTED"))
    expectTypeOf(err.apiCode).toEqualTypeOf<number | undefined>();
  type ByCode = errors.NatsErrorByCode;
  type Rules = ErrorTypeRules<typeof errors, ByCode, errors.NatsError, ShardkitGuard<ByCode>>;
  expectTypeOf<Rules>().toEqualTypeOf<ErrorTypeRulesKept>();
  // @ts-expect-error not a code of this package
  new errors.NatsError("NOPE", "x");
});
