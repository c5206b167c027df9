import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describePublishedPackage(pkgDir);

describe("README", () => {
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
