import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};
// The workspace packages it depends on, dependencies before their dependents.
const alsoPack = ["id", "scatter", "selector", "prisma", "ownership"].map((dir) =>
  fileURLToPath(new URL(`../../${dir}`, import.meta.url)),
);

describe("published package", () => {
  it("passes publint and are-the-types-wrong, imports from ESM and CommonJS, and its binary runs in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir, {
      alsoPack,
      scripts: {
        // The installed binary, as `npx shardkit` runs it: its version, and a scorecard from stdin.
        bin: `import { execFileSync } from "node:child_process";
const run = (args, input) => execFileSync("node_modules/.bin/shardkit", args, { encoding: "utf8", input });
console.log(run(["--version"]).trim());
const sample = ['{"t":"a"}', '{"t":"b","op":"write"}', '{"t":"a"}'].join("\\n");
console.log(JSON.parse(run(["analyze", "-", "--key", "t", "--members", "2", "--json"], sample)).candidates[0].scorecard.cardinality);`,
      },
    });
    expect(report.name).toBe("@shardkit/cli");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "CliError",
      "ConfigUnavailableError",
      "ExitCode",
      "SampleFileError",
      "UnknownDatabaseError",
      "UsageError",
      "analyze",
      "doctor",
      "exitCodeOf",
      "isShardkitError",
      "move",
      "redrive",
      "rollout",
      "run",
      "status",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
    expect(report.scripts.bin?.split("\n")).toEqual([version, "2"]); // its version, and the sample's cardinality (two keys)
  }, 300_000);
});
