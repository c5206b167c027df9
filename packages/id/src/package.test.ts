import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, and imports from ESM and CommonJS in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir);
    expect(report.name).toBe("@shardkit/id");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "InvalidShardError",
      "InvalidShardedIdError",
      "MAX_GROUP",
      "MAX_MEMBER",
      "ShardIdentifier",
      "ShardedId",
      "ShardedUUID",
      "ShardkitError",
      "asId",
      "isShardkitError",
      "murmur3",
      "prepareCandidates",
      "rendezvous",
      "shardHash",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
  }, 120_000);

  it("the README example is examples/quickstart.mjs verbatim, and it runs against the built package", () => {
    const example = readFileSync(`${pkgDir}/examples/quickstart.mjs`, "utf8");
    expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
    const output = execFileSync("node", ["examples/quickstart.mjs"], { cwd: pkgDir, encoding: "utf8" });
    const lines = output.trim().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^[0-9a-f-]{36} {2}shard 1\/5 \(group 1, member 5\)/);
    expect(lines[1]).toMatch(/shard 1\/5/);
    expect(lines[2]).toMatch(/shard 0\/0/);
    expect(lines[3]).toBe(
      'InvalidShardedIdError (INVALID_SHARDED_ID): Invalid sharded ID "0f8fad5b-d9cb-469f-a165-70867728950e": version is 4, expected 7',
    );
  });
});
