import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};
describePublishedPackage(pkgDir, {
  title:
    "passes publint and are-the-types-wrong, imports from ESM and CommonJS, and its binary runs in a fresh project",
  timeoutMs: 300_000,
  scripts: {
    // The installed binary, as `npx shardkit` runs it: its version, and a scorecard from stdin.
    bin: `import { execFileSync } from "node:child_process";
const run = (args, input) => execFileSync("node_modules/.bin/shardkit", args, { encoding: "utf8", input });
console.log(run(["--version"]).trim());
const sample = ['{"t":"a"}', '{"t":"b","op":"write"}', '{"t":"a"}'].join("\\n");
console.log(JSON.parse(run(["analyze", "-", "--key", "t", "--members", "2", "--json"], sample)).candidates[0].scorecard.cardinality);`,
  },
  check: (report) => {
    expect(report.scripts.bin?.split("\n")).toEqual([version, "2"]); // its version, and the sample's cardinality (two keys)
  },
});
