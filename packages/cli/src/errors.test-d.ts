import type { ShardkitError } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import {
  type CliError,
  type CliErrorByCode,
  type CliErrorCode,
  type ConfigUnavailableError,
  isShardkitError,
  type SampleFileError,
  type UnknownDatabaseError,
  type UsageError,
} from "./index.js";

declare const err: unknown;

describe("isShardkitError narrows without casts", () => {
  it("a CLI code narrows to that code's class", () => {
    if (isShardkitError(err, "INVALID_USAGE")) {
      expectTypeOf(err).toEqualTypeOf<UsageError>();
      expectTypeOf(err.issues).toEqualTypeOf<string[]>();
    }
    if (isShardkitError(err, "CONFIG_UNAVAILABLE")) expectTypeOf(err).toEqualTypeOf<ConfigUnavailableError>();
    if (isShardkitError(err, "INVALID_SAMPLE_FILE"))
      expectTypeOf(err.line).toEqualTypeOf<number | undefined>();
    if (isShardkitError(err, "UNKNOWN_DATABASE")) expectTypeOf(err).toEqualTypeOf<UnknownDatabaseError>();
  });

  it("another package's code, or none, narrows to ShardkitError", () => {
    if (isShardkitError(err, "INVALID_CONFIG"))
      expectTypeOf(err).toEqualTypeOf<ShardkitError<"INVALID_CONFIG">>();
    if (isShardkitError(err)) expectTypeOf(err).toEqualTypeOf<ShardkitError<string>>();
  });

  it("CliErrorByCode covers every code; every class is a CliError", () => {
    expectTypeOf<keyof CliErrorByCode>().toEqualTypeOf<CliErrorCode>();
    expectTypeOf<CliErrorByCode[CliErrorCode]>().toExtend<CliError>();
    expectTypeOf<SampleFileError["code"]>().toEqualTypeOf<"INVALID_SAMPLE_FILE">();
  });
});
