import { type AddressInfo, createServer } from "node:net";
import { isShardkitError as isAnyShardkitError, ShardIdentifier } from "@shardkit/id";
import { MoveFailedError, MoveInProgressError } from "@shardkit/ownership";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { describe, expect, it } from "vitest";
import { analyze } from "./analyze.js";
import { startDashboard } from "./dashboard/server.js";
import * as errors from "./errors.js";
import { isShardkitError, UsageError } from "./errors.js";
import { move } from "./move.js";
import { ExitCode, exitCodeOf } from "./run.js";
import { status } from "./status.js";

/** A configuration whose database is never reached: these errors come before any connection. */
const env = {
  SHARDKIT_SHARDS: JSON.stringify([{ group: 0, member: 0, url: "postgresql://u@127.0.0.1:1/x" }]),
};

/** Every code (the Record makes the table exhaustive), its one class, and a public call that raises it. */
const byCode: ErrorTable<errors.CliErrorCode> = {
  INVALID_USAGE: [UsageError, () => analyze({ file: "-", stdin: "{}", keys: [], members: 8 })],
  CONFIG_UNAVAILABLE: [errors.ConfigUnavailableError, () => status({ env: {} })],
  INVALID_SAMPLE_FILE: [
    errors.SampleFileError,
    () => analyze({ file: "-", stdin: "not json", keys: ["k"], members: 2 }),
  ],
  UNKNOWN_DATABASE: [
    errors.UnknownDatabaseError,
    () => move({ env, shard: "0/0", to: "nowhere", tables: ["Wallet"] }),
  ],
  ADDRESS_IN_USE: [
    errors.AddressInUseError,
    async () => {
      // A port taken by another program: the dashboard refuses before it reads any database.
      const taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = taken.address() as AddressInfo;
        return await startDashboard({ env, port });
      } finally {
        taken.close();
      }
    },
  ],
};

describeErrorRules(errors, byCode, import.meta.url);

describe("CLI errors", () => {
  it("usage, configuration and input errors are exit code 2, whatever package threw them; the rest 1", async () => {
    for (const [, trigger] of Object.values(byCode)) {
      const error = await (async () => trigger())().catch((e: unknown) => e);
      expect(exitCodeOf(error)).toBe(ExitCode.USAGE);
    }
    const config = await status({ env: { SHARDKIT_SHARDS: "[]" } }).catch((e: unknown) => e);
    expect(isAnyShardkitError(config, "INVALID_CONFIG")).toBe(true);
    expect(exitCodeOf(config)).toBe(2);
    const shard = await move({ env, shard: "9/99", to: "x", tables: ["T"] }).catch((e: unknown) => e);
    expect(isShardkitError(shard, "INVALID_USAGE") && shard.issues[0]).toMatch(/^shard "9\/99": /);
    expect(exitCodeOf(new Error("connection reset"))).toBe(ExitCode.PROBLEMS);
  });

  it("a move left half-done is exit code 3 (run it again); one undone, taken over or refused is 1", () => {
    const shard = ShardIdentifier.of(0, 1);
    const failed = (left: "undone" | "half-done" | "taken-over", rerun: "undo" | "finish" | null) =>
      new MoveFailedError(shard, { step: "fence", left, rerun, what: "" });
    expect(exitCodeOf(failed("half-done", "undo"))).toBe(ExitCode.HALF_DONE);
    expect(exitCodeOf(failed("half-done", "finish"))).toBe(3);
    expect(exitCodeOf(failed("undone", null))).toBe(ExitCode.PROBLEMS);
    expect(exitCodeOf(failed("taken-over", null))).toBe(ExitCode.PROBLEMS);
    const held = new MoveInProgressError(shard, {
      holder: "h",
      step: "copying",
      to: "e",
      expiresInMs: 9000,
      database: "a",
    });
    expect(exitCodeOf(held)).toBe(ExitCode.PROBLEMS);
  });

  it("keep what they say: issues, the sample line, the known databases", async () => {
    const sample = await analyze({ file: "-", stdin: '{"k":1}\n{"k":true}', keys: ["k"], members: 2 }).catch(
      (e: unknown) => e,
    );
    expect(isShardkitError(sample, "INVALID_SAMPLE_FILE") && sample.line).toBe(2);
    const unknown = await move({ env, shard: "0/0", to: "nowhere", tables: ["Wallet"] }).catch(
      (e: unknown) => e,
    );
    expect(isShardkitError(unknown, "UNKNOWN_DATABASE") && unknown.known).toEqual([
      "postgresql://u@127.0.0.1:1/x",
    ]);
    const usage = new UsageError(["a", "b"]);
    expect(usage.message).toBe("Invalid usage:\n  - a\n  - b");
    expect(new UsageError(["only one"]).message).toBe("only one");
  });
});
