import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The package's own modules import each other without cycles, and never the package by its name.
const src = dirname(fileURLToPath(import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.ts$/.test(name) && !/\.test(-d)?\.ts$/.test(name) ? [path] : [];
  });
}

/** Relative imports that exist at run time (`import type` and type-only re-exports left out). */
function runtimeImports(file: string): { relative: string[]; self: boolean } {
  const text = readFileSync(file, "utf8");
  const relativeImports: string[] = [];
  let self = false;
  for (const match of text.matchAll(/^(?:import|export)\s+(type\s+)?[^;]*?from\s+"([^"]+)"/gms)) {
    const [, typeOnly, specifier] = match;
    if (specifier!.startsWith("@shardkit/prisma")) self = true;
    if (typeOnly || !specifier!.startsWith(".")) continue;
    relativeImports.push(resolve(dirname(file), specifier!.replace(/\.js$/, ".ts")));
  }
  return { relative: relativeImports, self };
}

describe("module structure", () => {
  const files = sources(src);
  const graph = new Map(files.map((f) => [f, runtimeImports(f)]));

  it("has no import cycle", () => {
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const visit = (file: string, path: string[]) => {
      if (state.get(file) === "done") return;
      if (state.get(file) === "open") {
        cycles.push([...path.slice(path.indexOf(file)), file].map((f) => relative(src, f)).join(" -> "));
        return;
      }
      state.set(file, "open");
      for (const next of graph.get(file)?.relative ?? []) visit(next, [...path, file]);
      state.set(file, "done");
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
    expect(files.length).toBeGreaterThan(15);
  });

  it("never imports the package by its own name", () => {
    expect(files.filter((f) => graph.get(f)?.self).map((f) => relative(src, f))).toEqual([]);
  });
});
