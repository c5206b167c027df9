import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { checkPublishedPackage, inDependencyOrder, valueExportsOf } from "./quality.js";

/**
 * Registers the published-package test every package has: it packs the package with its workspace
 * dependencies (read from its package.json), installs them into a fresh npm project, and expects a
 * clean publint and are-the-types-wrong, and every entry to export, from `import()` and `require()`
 * alike, exactly the values its source entry names (`valueExportsOf`). `check(report)` adds what is
 * the package's own (its `scripts`' output). `readme` registers the README test: each example file
 * stands verbatim in README.md, and run in the package's folder (`node` for .mjs, tsx for .ts) it
 * prints the lines its function expects (given them and the README).
 * @param {string} pkgDir
 * @param {import("./published.js").PublishedPackageOptions} [options]
 */
export function describePublishedPackage(pkgDir, options = {}) {
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  if (options.readme) describeReadme(pkgDir, options.readme);
  describe("published package", () => {
    it(
      options.title ??
        "passes publint and are-the-types-wrong, and each entry exports from ESM and CommonJS in a fresh project what its source names",
      () => {
        const report = checkPublishedPackage(pkgDir, {
          alsoPack: inDependencyOrder(Object.keys(pkg.dependencies ?? {})),
          ...(options.scripts ? { scripts: options.scripts } : {}),
        });
        expect(report.name).toBe(pkg.name);
        expect(report.publint).not.toMatch(/warning|error|suggestion/i);
        expect(report.attw.ok, report.attw.output).toBe(true);
        const exportsMap = typeof pkg.exports === "object" ? pkg.exports : { ".": pkg.exports };
        for (const [key, target] of Object.entries(exportsMap)) {
          if (key.endsWith(".json")) continue;
          const built = typeof target === "string" ? target : target.import.default;
          const source = join(pkgDir, built.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"));
          const expected = valueExportsOf(source);
          const spec = key === "." ? pkg.name : `${pkg.name}/${key.slice(2)}`;
          expect(report.entries[spec], spec).toEqual({ esm: expected, cjs: expected });
        }
        options.check?.(report);
      },
      patient(options.timeoutMs ?? 300_000),
    );
  });
}

function describeReadme(pkgDir, examples) {
  describe("README", () => {
    it.each(Object.entries(examples))(
      "the README example %s is the file verbatim, and it runs",
      (file, expectLines) => {
        const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
        expect(readme).toContain(readFileSync(join(pkgDir, file), "utf8"));
        const [command, args] = file.endsWith(".ts") ? ["pnpm", ["exec", "tsx", file]] : ["node", [file]];
        const output = execFileSync(command, args, {
          cwd: pkgDir,
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        });
        expectLines(output.trim().split("\n"), readme);
      },
      patient(120_000),
    );
  });
}
