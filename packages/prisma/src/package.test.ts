import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, and imports from ESM and CommonJS in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir, {
      alsoPack: ["../../id", "../../scatter"].map((dir) => fileURLToPath(new URL(dir, import.meta.url))),
    });
    expect(report.name).toBe("@shardkit/prisma");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "ActionUnit",
      "CrossShardError",
      "PartialCommitError",
      "RegistryConfigError",
      "ShardKeyRequiredError",
      "ShardRegistry",
      "ShardRoutingError",
      "StagedWrite",
      "UnknownShardError",
      "UnsupportedShardOperationError",
      "ScatterError",
      "ScatterRefusedError",
      "IdempotencyConflictError",
      "consumeOnce",
      "createOutboxRelay",
      "createShardRegistry",
      "emitEvent",
      "idempotent",
      "shardRegistryFromConfig",
      "shardRegistryFromEnv",
      "shardRouting",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
  }, 300_000);

  it("the README example is examples/quickstart.ts verbatim, and it runs on embedded PGlite shards", () => {
    const example = readFileSync(`${pkgDir}/examples/quickstart.ts`, "utf8");
    expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
    const output = execFileSync("pnpm", ["exec", "tsx", "examples/quickstart.ts"], {
      cwd: pkgDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(output.trim().split("\n")).toEqual([
      "eu database: Ana (1 wallet)",
      "mx database: Luis (1 wallet)",
      "Ana's balance: 70n",
      "CROSS_SHARD: Action writes to shards 0/1, 1/0",
    ]);
  }, 120_000);
});
