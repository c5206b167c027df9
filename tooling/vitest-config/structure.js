import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/** The package's sources: every .ts file but tests, benchmarks and generated clients. */
function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "generated" ? [] : sources(path);
    return name.endsWith(".ts") && !/\.test(-d)?\.ts$|\.bench\.ts$/.test(name) ? [path] : [];
  });
}

/** A file's imports: relative ones (static, type-only and `import()` alike) as paths, and whether it names `self`. */
function importsOf(file, self) {
  const text = readFileSync(file, "utf8");
  const specifiers = [
    ...[...text.matchAll(/^(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]),
    ...[...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1]),
  ];
  return {
    relative: specifiers
      .filter((s) => s.startsWith("."))
      .map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts"))),
    self: specifiers.some((s) => s === self || s.startsWith(`${self}/`)),
  };
}

/**
 * The module rules every shardkit package keeps, as tests: its modules import each other without
 * a cycle, counting type-only imports (a type cycle is two modules that cannot be read, moved or
 * split apart either), and never import the package by its own name (but for `entriesOnMain`).
 * @param {import("./structure.js").StructureRules} rules
 */
export function describeModuleStructure({ sourceDir, packageName, entriesOnMain = [] }) {
  describe("module structure", () => {
    const files = sources(sourceDir);
    const graph = new Map(files.map((f) => [f, importsOf(f, packageName)]));

    it("has no import cycle, type-only imports included", () => {
      const cycles = [];
      const state = new Map();
      const visit = (file, path) => {
        if (state.get(file) === "done") return;
        if (state.get(file) === "open") {
          cycles.push(
            [...path.slice(path.indexOf(file)), file].map((f) => relative(sourceDir, f)).join(" -> "),
          );
          return;
        }
        state.set(file, "open");
        for (const next of graph.get(file)?.relative ?? []) if (graph.has(next)) visit(next, [...path, file]);
        state.set(file, "done");
      };
      for (const file of files) visit(file, []);
      expect(cycles).toEqual([]);
      expect(files.length).toBeGreaterThan(0);
    });

    it("never imports the package by its own name", () => {
      const named = files.filter((f) => graph.get(f)?.self).map((f) => relative(sourceDir, f));
      expect(named.filter((f) => !entriesOnMain.includes(f))).toEqual([]);
    });
  });
}
