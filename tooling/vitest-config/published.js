import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkPublishedPackage, inDependencyOrder, valueExportsOf } from "./quality.js";

/**
 * Registers the published-package test every package has: it packs the package with its workspace
 * dependencies (read from its package.json), installs them into a fresh npm project, and expects a
 * clean publint and are-the-types-wrong, and every entry to export, from `import()` and `require()`
 * alike, exactly the values its source entry names (`valueExportsOf`). `check(report)` adds what is
 * the package's own (its `scripts`' output).
 * @param {string} pkgDir
 * @param {{ scripts?: Record<string, string>, timeoutMs?: number, title?: string, check?: (report: import("./quality.js").PublishedPackageReport) => void }} [options]
 */
export function describePublishedPackage(pkgDir, options = {}) {
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
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
      options.timeoutMs ?? 300_000,
    );
  });
}
