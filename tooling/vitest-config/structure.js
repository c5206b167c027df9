import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { packageSources, pageSources } from "./sources.js";

/**
 * A file's imports: relative ones (static, type-only, side-effect only, `import x = require()` and
 * `import()` alike): the source files they resolve to, those that resolve to none, and whether one
 * names `self`.
 */
function importsOf(file, self) {
  const text = readFileSync(file, "utf8");
  const specifiers = [
    ...[...text.matchAll(/^(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]),
    ...[...text.matchAll(/^import\s+"([^"]+)"/gm)].map((m) => m[1]),
    ...[...text.matchAll(/\b(?:import|require)\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1]),
  ];
  const local = specifiers
    .filter((s) => s.startsWith("."))
    .map((s) => ({ specifier: s, path: sourceOf(resolve(dirname(file), s)) }));
  return {
    relative: local.flatMap((l) => (l.path ? [l.path] : [])),
    unresolved: local.filter((l) => !l.path).map((l) => l.specifier),
    self: specifiers.some((s) => s === self || s.startsWith(`${self}/`)),
  };
}

/** The source file a relative import names (`./x.js` is `./x.ts`, a folder its `index.ts`), or null. */
function sourceOf(path) {
  const base = path.replace(/\.(?:js|ts)$/, "");
  for (const candidate of [`${base}.ts`, `${base}/index.ts`, path]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** "About 400 lines": a file longer than this says why in its opening comment ("... 400 lines ..."). */
const MAX_LINES = 420;

/** "About 80 lines": a longer function says why in the comment right above it ("... 80 lines ..."). */
const MAX_FUNCTION_LINES = 84;

/**
 * The functions of `file` (declarations, methods, function expressions and arrows) longer than
 * about 80 lines whose comment (right above it, or above the statement that declares it) does not
 * say why: `file:line name (n lines)`.
 */
function longFunctions(file, base) {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const explained = (node) => {
    // The comment of the function, or of what declares it (`const f = () => ...`, `x: function`).
    for (let at = node; at && at !== source; at = at.parent) {
      const comments = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? [];
      if (comments.some((c) => /\b80 lines\b/.test(text.slice(c.pos, c.end)))) return true;
      if (ts.isStatement(at) || ts.isClassElement(at) || ts.isPropertyAssignment(at)) return false;
    }
    return false;
  };
  const visit = (node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const lines = lineOf(node.getEnd()) - lineOf(node.getStart()) + 1;
      if (lines > MAX_FUNCTION_LINES && !explained(node)) {
        const name =
          node.name?.getText() ??
          (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText() : "(anonymous)");
        found.push(`${relative(base, file)}:${lineOf(node.getStart())} ${name} (${lines} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Whether `file` (relative to the source folder) is one of `patterns`: `dir/` a folder, `*` any part of a name. */
function matches(file, patterns) {
  return patterns.some((p) =>
    p.endsWith("/")
      ? file.startsWith(p)
      : new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", "[^/]*")}$`).test(file),
  );
}

/**
 * For each module of `from`, the first import path (`a.ts -> b.ts -> c.ts`) by which it reaches a
 * module of `to`, directly or through other modules of the package, type-only imports included.
 */
function reaches(graph, sourceDir, from, to) {
  const rel = (f) => relative(sourceDir, f);
  const found = [];
  for (const start of [...graph.keys()].filter((f) => matches(rel(f), from))) {
    const seen = new Set([start]);
    const queue = [[start]];
    while (queue.length > 0) {
      const path = queue.shift();
      const next = (graph.get(path.at(-1))?.relative ?? []).filter((f) => graph.has(f) && !seen.has(f));
      const hit = next.find((f) => matches(rel(f), to));
      if (hit) {
        found.push([...path, hit].map(rel).join(" -> "));
        break;
      }
      for (const f of next) {
        seen.add(f);
        queue.push([...path, f]);
      }
    }
  }
  return found;
}

/**
 * The module rules every shardkit package keeps, as tests: its modules import each other without
 * a cycle, counting type-only imports (a type cycle is two modules that cannot be read, moved or
 * split apart either), each file does one job in about 400 lines (or its opening comment says why
 * not), each function in about 80 (or the comment above it says why not), and no module imports the
 * package by its own name (but for `entriesOnMain`). A browser page's modules (`pageDir`, plain .js
 * served as they are) keep the same rules. `apart` names sides of the package that must stay apart:
 * no module of a side reaches one of what it must not, even through other modules.
 * @param {import("./structure.js").StructureRules} rules
 */
export function describeModuleStructure({ sourceDir, packageName, entriesOnMain = [], pageDir, apart = [] }) {
  describe("module structure", () => {
    // Generated clients (`src/generated`) are Prisma's, not the package's.
    const files = [
      ...packageSources(sourceDir).filter((f) => !relative(sourceDir, f).split("/").includes("generated")),
      ...(pageDir ? pageSources(pageDir) : []),
    ];
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

    it("imports only source files that exist", () => {
      const unresolved = files.flatMap((f) =>
        graph.get(f).unresolved.map((s) => `${relative(sourceDir, f)}: ${s}`),
      );
      expect(unresolved).toEqual([]);
    });

    it("keeps each source file to about 400 lines, or says in its opening comment why it is longer", () => {
      const long = files
        .filter((f) => !/\.(?:test|test-d|bench)\.ts$/.test(f))
        .filter((f) => {
          const text = readFileSync(f, "utf8");
          if (text.split("\n").length <= MAX_LINES) return false;
          const opening = text.slice(0, text.search(/^(?:import|export)\s/m));
          return !/\b400 lines\b/.test(opening);
        })
        .map((f) => relative(sourceDir, f));
      expect(long).toEqual([]);
    });

    it("keeps each function to about 80 lines, or says in the comment above it why it is longer", () => {
      const long = files
        .filter((f) => !/\.(?:test|test-d|bench)\.ts$/.test(f))
        .flatMap((f) => longFunctions(f, sourceDir));
      expect(long).toEqual([]);
    });

    for (const rule of apart) {
      it(`keeps ${rule.name} apart: none of its modules imports ${rule.mustNotReach.name}, even through others`, () => {
        const rel = (f) => relative(sourceDir, f);
        // Each pattern names a module or a folder that exists: a rename must not empty the rule.
        const empty = [...rule.modules, ...rule.mustNotReach.modules].filter(
          (p) => !files.some((f) => matches(rel(f), [p])),
        );
        expect(empty).toEqual([]);
        expect(reaches(graph, sourceDir, rule.modules, rule.mustNotReach.modules)).toEqual([]);
      });
    }

    it("never imports the package by its own name", () => {
      const named = files.filter((f) => graph.get(f)?.self).map((f) => relative(sourceDir, f));
      expect(named.filter((f) => !entriesOnMain.includes(f))).toEqual([]);
    });
  });
}
