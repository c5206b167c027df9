import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkPublishedPackage, valueExportsOf } from "./quality.js";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The workspace packages `pkgDir` depends on (dependencies and peers, transitively), dependencies first. */
function workspaceDependencies(pkgDir) {
  const order = [];
  const visit = (dir, seen) => {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    const deps = { ...pkg.peerDependencies, ...pkg.dependencies };
    for (const [name, spec] of Object.entries(deps)) {
      if (!String(spec).startsWith("workspace:") || !name.startsWith("@shardkit/")) continue;
      const depDir = resolve(repoRoot, "packages", name.slice("@shardkit/".length));
      if (seen.has(depDir)) continue;
      seen.add(depDir);
      visit(depDir, seen);
      order.push(depDir);
    }
  };
  visit(pkgDir, new Set());
  return order;
}

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
          alsoPack: workspaceDependencies(pkgDir),
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
