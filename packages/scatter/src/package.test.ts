import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const idDir = fileURLToPath(new URL("../../id", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, and imports from ESM and CommonJS in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir, { alsoPack: [idDir] });
    expect(report.name).toBe("@shardkit/scatter");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "InvalidCursorError",
      "InvalidScatterOptionsError",
      "ScatterAbortedError",
      "ScatterDeadlineError",
      "ScatterError",
      "ScatterFailedError",
      "UnsortableValueError",
      "UnsortedInputError",
      "compareBy",
      "decodeCursor",
      "encodeCursor",
      "isAfter",
      "isShardkitError",
      "keysetSql",
      "keysetWhere",
      "mergeAggregates",
      "mergeGroupBy",
      "mergePage",
      "mergeSorted",
      "normalizeOrderBy",
      "planAggregate",
      "planPage",
      "positionOf",
      "scatter",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
  }, 120_000);

  it("the README example is examples/pages.mjs verbatim, and it runs against the built package", () => {
    const example = readFileSync(`${pkgDir}/examples/pages.mjs`, "utf8");
    expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
    const output = execFileSync("node", ["examples/pages.mjs"], { cwd: pkgDir, encoding: "utf8" });
    const lines = output.trim().split("\n");
    expect(lines).toEqual([
      "complete: false, missing: ap (error: connect ECONNREFUSED 127.0.0.1:5433)",
      "partial page: eu-2=300 us-1=300 eu-0=120 us-0=99",
      'ScatterFailedError TARGETS_FAILED: 1 of 3 targets missing: "ap" (error: connect ECONNREFUSED 127.0.0.1:5433)',
      "page: eu-2=300 us-1=300 ap-0=250 eu-0=120  (fetched eu:4 us:3 ap:2)",
      expect.stringMatching(/^next cursor: [A-Za-z0-9_-]+$/),
      "page: us-0=99 ap-1=75 eu-1=75 eu-3=42  (fetched eu:2 us:2 ap:1)",
      expect.stringMatching(/^next cursor: [A-Za-z0-9_-]+$/),
      "page: us-2=15  (fetched eu:0 us:1 ap:0)",
    ]);
  });
});
