import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, and imports from ESM and CommonJS in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir, {
      alsoPack: ["../../id", "../../scatter", "../../prisma"].map((dir) =>
        fileURLToPath(new URL(dir, import.meta.url)),
      ),
    });
    expect(report.name).toBe("@shardkit/ownership");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "checkMove",
      "DatabasesUnansweredError",
      "EpochConflictError",
      "InvalidMapError",
      "MoveFailedError",
      "MoveInProgressError",
      "MoveLeaseLostError",
      "MovePrecheckError",
      "MoveTimeoutError",
      "MoveVerifyError",
      "OwnershipError",
      "OwnershipOptionsError",
      "PartitionMap",
      "SHARDKIT_TABLES",
      "STALE_OWNER_SQLSTATE",
      "ShardLease",
      "StaleOwnerError",
      "isShardkitError",
      "moveShard",
      "moveSteps",
      "readPartitionMap",
      "refusalOf",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
  }, 300_000);

  it("the README example is examples/transfer.ts verbatim, and it runs on embedded PGlite", () => {
    const example = readFileSync(`${pkgDir}/examples/transfer.ts`, "utf8");
    expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
    const output = execFileSync("pnpm", ["exec", "tsx", "examples/transfer.ts"], {
      cwd: pkgDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(output.trim().split("\n")).toEqual([
      'precheck of a move to "new": ok',
      "a second mover: MOVE_IN_PROGRESS",
      "a script writing to the old owner: fenced",
      'shard 0/1 is owned by "new" at epoch 2',
      'stale router\'s write: remaining 0 on "new", 1 refusal, 1 retry',
      'owner "new" at epoch 2; records: old moved, new owned',
    ]);
  }, 120_000);
});
