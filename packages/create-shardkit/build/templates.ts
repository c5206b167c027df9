// The templates, made from the reference services in apps/ (their single source of truth) at build
// time: each app's files as they are, except what only works inside this repository:
// - package.json: `catalog:` -> the catalog's version, `workspace:` -> `^<version>`, the private
//   tooling packages removed (their parts become files of the template), the test tools the repo's
//   root provides added, `generate` on a local script that also works offline;
// - tsconfig.json without `extends` (the shared settings written in), vitest.config.ts without
//   @shardkit/vitest-config (the app's own options, as the app's config computes them);
// - imports of @shardkit/test-db -> src/test/test-db.js, with its types in src/test/test-db.d.ts:
//   tooling/test-db's index.js and index.d.ts, copied unchanged (one source, never a hand copy),
//   and of @shardkit/test-db/<entry> -> src/test/<entry>.js and .d.ts, that entry's files likewise;
//   its `shardkit-prisma-generate` bin -> scripts/prisma-generate.mjs, the bin's file as it is;
// - imports of @shardkit/service-kit/<entry> (the runtime the apps share) -> src/service-kit/<entry>.ts,
//   the entry's file of tooling/service-kit as it is (build/service-kit.ts);
// - a .gitignore (shipped as `gitignore`: npm does not publish `.gitignore` files) and a README:
//   how to start, then the app's README with the repository's commands turned into npm's.
// The build fails (it never ships a broken template) when something repo-specific is left, or a
// source imports a package the template's package.json does not declare.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, posix, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { catalogVersion } from "@shardkit/vitest-config/quality";
import { localServiceKit, SERVICE_KIT, serviceKitEntries, serviceKitFiles } from "./service-kit.js";

export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const repoRoot = resolve(packageDir, "../..");
const templateFiles = join(packageDir, "template-files");

/** A template: its files (path relative to the project, `/`-separated) and their text. */
export type TemplateFiles = Map<string, string>;

/** The placeholder for the new project's name in a template's README (package.json's `name` is set directly). */
export const NAME_PLACEHOLDER = "{{name}}";

/** Where the app's own tests make a PostgreSQL server of their own: test-db's `testCluster(...)`. */
const TEST_CLUSTER = /\btestCluster\(/;

/** Paths of an app never copied: what its build, install, tests and demo write. */
const SKIPPED = [
  /(^|\/)node_modules(\/|$)/,
  /(^|\/)(dist|coverage|\.turbo|\.reports|\.data)(\/|$)/,
  /^src\/generated(\/|$)/,
  /\.(tsbuildinfo|tgz|log)$/,
];
/** The app's files the template replaces with files of its own. */
const REPLACED = new Set(["package.json", "tsconfig.json", "vitest.config.ts", "README.md", "CHANGELOG.md"]);

/** Where a template's copy of @shardkit/test-db's bin goes, and the bin's name. */
export const PRISMA_GENERATE = { target: "scripts/prisma-generate.mjs", bin: "shardkit-prisma-generate" };

/** The private tooling packages the apps use, and what replaces each in a template. */
const PRIVATE_REPLACEMENTS: Record<string, { devDependencies: string[]; bins?: Record<string, string> }> = {
  // Its helpers become src/test/test-db.js and .d.ts (which use pg); its bin, scripts/prisma-generate.mjs
  // (PRISMA_GENERATE: the bin's file, unchanged).
  "@shardkit/test-db": {
    devDependencies: ["pg", "@types/pg"],
    bins: { [PRISMA_GENERATE.bin]: `node ${PRISMA_GENERATE.target}` },
  },
  // Written into tsconfig.json.
  "@shardkit/tsconfig": { devDependencies: [] },
  // Written into vitest.config.ts.
  "@shardkit/vitest-config": { devDependencies: [] },
  // Its entries become src/service-kit/*.ts; what they import, the app declares itself (checked).
  [SERVICE_KIT.name]: { devDependencies: [] },
};
/** What the repository's root gives every app, which a project of its own declares itself. */
const ROOT_PROVIDED = ["typescript", "vitest", "vite", "@types/node"];

/** Text no template file may contain: each is a sign of the repository left in it. */
const FORBIDDEN: [RegExp, string][] = [
  [/\bcatalog:/, "a catalog: version"],
  [/\bworkspace:[*^~]/, "a workspace: version"],
  [/@shardkit\/(test-db|tsconfig|tsup-config|vitest-config|service-kit)\b/, "a private tooling package"],
  [/\bpnpm\b/, "pnpm (the template is an npm project)"],
  [/\.\.\/\.\.\/\.\.\//, "a path out of the project (../../../)"],
  [/\bapps\/\w/, "a path of the repository (apps/...)"],
  [/repository root|from the root|at the root/i, "the repository's root"],
];

interface WorkspacePackage {
  name: string;
  dir: string;
  version: string;
  private: boolean;
}

interface Manifest {
  name: string;
  version?: string;
  private?: boolean;
  description?: string;
  type?: string;
  bin?: Record<string, string>;
  engines?: Record<string, string>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
}

/** A template that cannot be made as the app is: the message says what to change. */
export class TemplateBuildError extends Error {
  override readonly name = "TemplateBuildError";
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;

/**
 * pnpm-workspace.yaml's `allowBuilds` (which dependencies may run install scripts) as npm's
 * `allowScripts`: npm 11 skips the install scripts of dependencies it does not list, with a warning.
 */
export function allowedScripts(repo = repoRoot): Record<string, boolean> {
  const yaml = readFileSync(join(repo, "pnpm-workspace.yaml"), "utf8");
  const block = yaml.split(/^allowBuilds:\s*$/m)[1]?.split(/^\S/m)[0] ?? "";
  const allowed: Record<string, boolean> = {};
  for (const m of block.matchAll(/^\s+("?)([^":#\s]+)\1:\s*(true|false)\b/gm))
    allowed[m[2]!] = m[3] === "true";
  return allowed;
}

/** The workspace's packages by name (the folders pnpm-workspace.yaml's `packages:` globs list). */
export function workspacePackages(repo = repoRoot): Map<string, WorkspacePackage> {
  const yaml = readFileSync(join(repo, "pnpm-workspace.yaml"), "utf8");
  const block = yaml.split(/^packages:\s*$/m)[1]?.split(/^\S/m)[0] ?? "";
  const globs = [...block.matchAll(/^\s+-\s+["']?([^"'\s]+)["']?/gm)].map((m) => m[1]!);
  const found = new Map<string, WorkspacePackage>();
  for (const glob of globs) {
    if (!glob.endsWith("/*")) throw new TemplateBuildError(`unsupported workspace glob ${glob}`);
    const parent = join(repo, glob.slice(0, -2));
    if (!existsSync(parent)) continue;
    for (const entry of readdirSync(parent)) {
      const manifest = join(parent, entry, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = readJson<Manifest>(manifest);
      found.set(pkg.name, {
        name: pkg.name,
        dir: join(parent, entry),
        version: pkg.version ?? "0.0.0",
        private: pkg.private === true,
      });
    }
  }
  return found;
}

/** The apps a template is made of: every folder of apps/ with a package.json. */
export function templateNames(repo = repoRoot): string[] {
  return readdirSync(join(repo, "apps"))
    .filter((name) => existsSync(join(repo, "apps", name, "package.json")))
    .sort();
}

function walk(dir: string, base = ""): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const rel = base ? `${base}/${entry}` : entry;
    if (SKIPPED.some((re) => re.test(rel))) return [];
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? walk(path, rel) : [rel];
  });
}

/** A dependency spec of the repository as a project of its own would write it. */
function standaloneSpec(
  dep: string,
  spec: string,
  workspace: Map<string, WorkspacePackage>,
  catalog: (name: string) => string,
): string | null {
  if (spec === "catalog:" || spec === "catalog:default") return catalog(dep);
  if (spec.startsWith("catalog:"))
    throw new TemplateBuildError(`${dep}: named catalogs (${spec}) are not supported`);
  if (spec.startsWith("workspace:")) {
    const target = workspace.get(dep);
    if (!target) throw new TemplateBuildError(`${dep}: ${spec}, but no workspace package has that name`);
    if (target.private) return null;
    const range = spec.slice("workspace:".length);
    if (range === "*" || range === "^") return `^${target.version}`;
    if (range === "~") return `~${target.version}`;
    return range;
  }
  return spec;
}

const sortKeys = (record: Record<string, string>) =>
  Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** The app's package.json as the template's, and the private packages it no longer uses. */
export function templateManifest(
  app: Manifest,
  options: {
    workspace?: Map<string, WorkspacePackage>;
    catalog?: (name: string) => string;
    root?: Manifest;
    allowScripts?: Record<string, boolean>;
  } = {},
): { manifest: Manifest; removed: string[] } {
  const workspace = options.workspace ?? workspacePackages();
  const catalog = options.catalog ?? catalogVersion;
  const root = options.root ?? readJson<Manifest>(join(repoRoot, "package.json"));
  const removed: string[] = [];
  const convert = (deps: Record<string, string> = {}) => {
    const out: Record<string, string> = {};
    for (const [dep, spec] of Object.entries(deps)) {
      const converted = standaloneSpec(dep, spec, workspace, catalog);
      if (converted === null) removed.push(dep);
      else out[dep] = converted;
    }
    return out;
  };
  const dependencies = convert(app.dependencies);
  const devDependencies = convert(app.devDependencies);
  const bins: Record<string, string> = {};
  for (const dep of removed) {
    const replacement = PRIVATE_REPLACEMENTS[dep];
    if (!replacement)
      throw new TemplateBuildError(
        `${app.name} uses the private package ${dep}, which templates have no replacement for (build/templates.ts)`,
      );
    Object.assign(bins, replacement.bins);
    for (const extra of replacement.devDependencies)
      if (!dependencies[extra]) devDependencies[extra] ??= catalog(extra);
  }
  for (const dep of ROOT_PROVIDED) {
    if (dependencies[dep] || devDependencies[dep]) continue;
    const spec = root.devDependencies?.[dep];
    if (!spec) throw new TemplateBuildError(`the root package.json does not declare ${dep}`);
    devDependencies[dep] = standaloneSpec(dep, spec, workspace, catalog)!;
  }
  const scripts: Record<string, string> = {};
  for (const [script, command] of Object.entries(app.scripts ?? {})) {
    const [bin = "", ...rest] = command.split(" ");
    scripts[script] = bins[bin] ? [bins[bin], ...rest].join(" ") : command;
  }
  if (scripts.generate) {
    // After `npm install`, the client exists: tests, demo and start need it. Without the prisma CLI
    // (a production install without devDependencies) it says so instead of failing the install.
    scripts.postinstall = `${scripts.generate} --if-installed`;
  }
  const privateBins = Object.keys(PRIVATE_REPLACEMENTS).flatMap((dep) => {
    const pkg = workspace.get(dep);
    return pkg ? Object.keys(readJson<Manifest>(join(pkg.dir, "package.json")).bin ?? {}) : [];
  });
  for (const [script, command] of Object.entries(scripts)) {
    const used = privateBins.find((bin) => new RegExp(`(^|[\\s;&|])${bin}\\b`).test(command));
    if (used)
      throw new TemplateBuildError(`${app.name}'s script ${script} runs ${used} of a private package`);
  }
  const manifest: Manifest = {
    name: app.name.replace(/^@[^/]+\//, ""),
    version: "0.1.0",
    private: true,
    ...(app.description ? { description: app.description } : {}),
    type: app.type ?? "module",
    engines: app.engines ?? root.engines ?? { node: ">=20.19" },
    scripts,
    dependencies: sortKeys(dependencies),
    devDependencies: sortKeys(devDependencies),
    allowScripts: options.allowScripts ?? allowedScripts(),
  };
  return { manifest, removed };
}

/** A tsconfig.json with its `extends` chain written in (workspace packages and relative paths). */
export function standaloneTsconfig(path: string, workspace = workspacePackages()): Record<string, unknown> {
  const config = readJson<Record<string, unknown>>(path);
  const { extends: parent, ...own } = config;
  if (parent === undefined) return config;
  if (typeof parent !== "string") throw new TemplateBuildError(`${path}: extends must be one string`);
  let parentPath: string;
  if (parent.startsWith(".")) parentPath = resolve(dirname(path), parent);
  else {
    const pkg = [...workspace.values()].find((p) => parent === p.name || parent.startsWith(`${p.name}/`));
    if (!pkg) throw new TemplateBuildError(`${path}: extends ${parent}, which is not a workspace package`);
    parentPath = join(pkg.dir, parent.slice(pkg.name.length + 1) || "tsconfig.json");
  }
  const base = standaloneTsconfig(parentPath, workspace);
  return {
    ...base,
    ...own,
    compilerOptions: {
      ...(base.compilerOptions as object | undefined),
      ...(own.compilerOptions as object | undefined),
    },
  };
}

/** JSON with two-space indents, and arrays of a few short strings or numbers on one line. */
export function formatJson(value: unknown): string {
  const format = (v: unknown, indent: string): string => {
    const inner = `${indent}  `;
    if (Array.isArray(v)) {
      const flat = `[${v.map((x) => JSON.stringify(x)).join(", ")}]`;
      if (v.every((x) => typeof x !== "object" || x === null) && flat.length <= 80) return flat;
      return `[\n${v.map((x) => `${inner}${format(x, inner)}`).join(",\n")}\n${indent}]`;
    }
    if (typeof v === "object" && v !== null) {
      const entries = Object.entries(v);
      if (entries.length === 0) return "{}";
      return `{\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${format(x, inner)}`).join(",\n")}\n${indent}}`;
    }
    return JSON.stringify(v);
  };
  return `${format(value, "")}\n`;
}

/** A value as TypeScript source (object keys bare where they can be, integers with `_` separators). */
function toSource(value: unknown, indent = ""): string {
  const inner = `${indent}  `;
  if (Array.isArray(value)) return `[${value.map((v) => toSource(v, indent)).join(", ")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value).map(
      ([k, v]) => `${inner}${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}: ${toSource(v, inner)},`,
    );
    return entries.length === 0 ? "{}" : `{\n${entries.join("\n")}\n${indent}}`;
  }
  if (typeof value === "number" && Number.isInteger(value) && Math.abs(value) >= 10_000)
    return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, "_");
  return JSON.stringify(value);
}

/**
 * The app's vitest.config.ts as a standalone one: the options its @shardkit/vitest-config project
 * computes (loaded, not parsed), without what only the workspace needs (its name, root, the aliases
 * of workspace packages to their sources, the setup file that scales the default time limits). Comments above `export default` are kept.
 */
export async function standaloneVitestConfig(appDir: string): Promise<string> {
  const path = join(appDir, "vitest.config.ts");
  // The lanes of `pnpm test` pick a project's files by SHARDKIT_TEST_FILES (a build run by a pack in
  // the release lane inherits it): a template runs all of its own, so its config is computed without.
  const lane = process.env.SHARDKIT_TEST_FILES;
  delete process.env.SHARDKIT_TEST_FILES;
  let loaded: { root?: string; resolve?: unknown; test?: Record<string, unknown>; [key: string]: unknown };
  try {
    loaded = (await import(pathToFileURL(path).href)).default;
  } finally {
    if (lane !== undefined) process.env.SHARDKIT_TEST_FILES = lane;
  }
  const unknown = Object.keys(loaded).filter((k) => !["root", "resolve", "test"].includes(k));
  if (unknown.length > 0)
    throw new TemplateBuildError(`${path}: no standalone form for ${unknown.join(", ")}`);
  // setupFiles and provide: the workspace's scaling of the default time limits by the machine's load
  // (tooling/vitest-config/patient-timeouts.js); a template keeps the bases.
  const {
    name: _name,
    typecheck,
    benchmark: _bench,
    setupFiles: _setup,
    provide: _provide,
    ...test
  } = loaded.test ?? {};
  const { tsconfig: _tsconfig, ...check } = (typecheck ?? {}) as Record<string, unknown>;
  const options = { ...test, ...(typecheck ? { typecheck: check } : {}) };
  const order = ["include", "typecheck", "testTimeout", "hookTimeout", "globalSetup", "fileParallelism"];
  const sorted = Object.fromEntries(
    Object.entries(options).sort(([a], [b]) => (order.indexOf(a) >>> 0) - (order.indexOf(b) >>> 0)),
  );
  const source = readFileSync(path, "utf8");
  const comments = source
    .split("\n")
    .filter((line) => line.startsWith("//"))
    .join("\n");
  return `import { defineConfig } from "vitest/config";\n\n${comments ? `${comments}\n` : ""}export default defineConfig({\n  test: ${toSource(sorted, "  ")},\n});\n`;
}

/**
 * `import ... from "@shardkit/test-db"` -> the template's own src/test/test-db.js (and its .d.ts);
 * `"@shardkit/test-db/<entry>"` -> src/test/<entry>.js.
 */
function localTestDb(path: string, text: string): string {
  return text.replace(
    /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])@shardkit\/test-db(?:\/([\w-]+))?\2/g,
    (_all, before: string, quote: string, entry: string | undefined) => {
      let rel = posix.relative(posix.dirname(path), `src/test/${entry ?? "test-db"}.js`);
      if (!rel.startsWith(".")) rel = `./${rel}`;
      return `${before}${quote}${rel}${quote}`;
    },
  );
}

/** The README's text with the repository's commands and paths turned into the project's. */
export function rewriteReadme(text: string, app: string): string {
  const scoped = `@shardkit/${app}`;
  const rules: [RegExp | string, string][] = [
    [/^# apps\/[\w-]+: the reference ([\w-]+) service\n/m, ""],
    [/From the repository root, `pnpm demo` \(or `pnpm --filter [^`]+ demo`\)/g, "`npm run demo`"],
    [/ \(from the repository root, after `pnpm bootstrap`\)/g, ""],
    [new RegExp(`pnpm --filter ${scoped} (demo|start|test)`, "g"), "npm run $1"],
    [/`pnpm test` at the root/g, "`npm test`"],
    [/\bnpm run (start|test)\b/g, "npm $1"],
    [/\bpnpm (start|test)\b/g, "npm $1"],
    [/\bpnpm (demo|generate|typecheck)\b/g, "npm run $1"],
    // npm hands a script its arguments after `--`.
    [/\bpnpm --silent token\b/g, "npm run --silent token --"],
    [new RegExp(`\`apps/${app}/(\\.data[^\`]*)\``, "g"), "`$1`"],
    [new RegExp(`(?:/[\\w.-]+)+/apps/${app}/`, "g"), `/path/to/${NAME_PLACEHOLDER}/`],
    [/\[`apps\/([\w-]+)`\]\(\.\.\/[\w-]+\)/g, "the `$1` template"],
    [/`apps\/([\w-]+)`/g, "the `$1` template"],
  ];
  let out = text;
  for (const [pattern, replacement] of rules) out = out.replace(pattern, replacement);
  return out.replace(/^\n+/, "");
}

/** The README of a template: the app's introduction, how to start, the Prisma client, then the rest of the app's README. */
function templateReadme(app: string, manifest: Manifest, appReadme: string, server: boolean): string {
  const rewritten = rewriteReadme(appReadme, app);
  const firstSection = rewritten.search(/^## /m);
  const about =
    (firstSection < 0 ? rewritten : rewritten.slice(0, firstSection)).trim() || manifest.description;
  const body = firstSection < 0 ? "" : rewritten.slice(firstSection);
  const intro = `# ${NAME_PLACEHOLDER}

${about ?? ""}

Made from shardkit's \`${app}\` template (\`npm create shardkit@latest ${NAME_PLACEHOLDER} -- --template ${app}\`):
the reference ${app} service, as a project of its own. Node.js 20.19 or later.

## Getting started

\`\`\`sh
npm install    # also generates the Prisma client (npm run generate)
npm test       # PostgreSQL on 127.0.0.1:5432, see Tests
npm run demo   # on embedded PGlite databases: no server needed
npm start      # the API on PORT (default 3000)
npm run typecheck
\`\`\`

The Prisma client is generated into \`src/generated/prisma\` (not committed: \`.gitignore\`) from
\`prisma/schema\`, by \`npm run generate\`, which \`npm install\` runs. Run it again after changing the
schema. It works offline too: \`scripts/prisma-generate.mjs\` runs \`prisma generate\` with
\`PRISMA_SCHEMA_ENGINE_BINARY\` set to a stub that exits 1, because generating never runs Prisma's
native schema engine but the CLI tries to download it first (set the variable yourself to use a
real engine). The schema reaches the databases through \`@shardkit/prisma\` (\`openShards\` rolls it
out to every shard at start-up, on Prisma's WebAssembly schema engine): no \`prisma migrate\`.
\`prisma/schema/shardkit.prisma\` is \`@shardkit/prisma\`'s outbox models, unchanged; a test compares
it with \`node_modules/@shardkit/prisma/schema/shardkit.prisma\`, so after upgrading
\`@shardkit/prisma\`, copy that file again.

`;
  const servers = !server
    ? ""
    : `\n\nSome tests need a second PostgreSQL server (to stop it, freeze it, or with \`wal_level = logical\`)
and make it themselves with \`pg_createcluster\` (the postgresql-common package of Debian and
Ubuntu), which needs root or the \`postgres\` user. Where it cannot be made (no
\`pg_createcluster\`, another user, or \`SHARDKIT_TEST_NO_CLUSTERS=1\`), those tests are skipped, and
the run says why (\`npx vitest run --reporter=verbose\` shows the reason next to each one). The
server is the test run's own: a cluster named after the package and the test process
(\`<name>_<pid>\`; \`testCluster\` and \`ownCluster\` in \`src/test/test-db.js\`), on a port nothing
else listens on, made by the tests and dropped after them, so no two runs on one machine share one
(and a run never stops or freezes a server another run uses: it refuses);
\`SHARDKIT_TEST_CLUSTER=<name>:<port>\` gives another name. The tests never change, stop or drop a
server of that name they did not make: they refuse to run.`;
  const postgres = `The tests need PostgreSQL on 127.0.0.1:5432, user \`postgres\` with trust authentication (a local
development server). \`src/test/test-db.js\` creates the databases of a run and drops them after it;
their names carry the test process's ID, so runs at the same time never share one.${servers}`;
  // At the end of the app's Tests section (after its list of test files), or as that section.
  const tests = /^## Tests\n[\s\S]*?(?=^## |(?![\s\S]))/m;
  const withTests = tests.test(body)
    ? body.replace(
        tests,
        (section) => `${section.trimEnd()}\n\n${postgres}\n${section.endsWith("\n\n") ? "\n" : ""}`,
      )
    : `${body.trimEnd()}\n\n## Tests\n\n${postgres}\n`;
  return `${intro}${withTests}`;
}

/** Package names a source file imports (bare specifiers, without node: built-ins). */
function importedPackages(text: string): string[] {
  const specs = [
    ...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)["']([^"'./][^"']*)["']/gm),
  ].map((m) => m[1]!);
  return specs
    .filter((s) => !s.startsWith("node:") && !builtinModules.includes(s.split("/")[0]!))
    .map((s) => (s.startsWith("@") ? s.split("/").slice(0, 2).join("/") : s.split("/")[0]!));
}

/** The exported names of a module or its declarations (functions, classes, consts). */
export function exportedNames(text: string): Set<string> {
  return new Set(
    [
      ...text.matchAll(
        /^export\s+(?:declare\s+)?(?:async\s+)?(?:function|class|const|let)\s+([A-Za-z_$][\w$]*)/gm,
      ),
    ].map((m) => m[1]!),
  );
}

/** tooling/test-db, whose files the templates copy. */
function testDbPackage(workspace: Map<string, WorkspacePackage>): WorkspacePackage {
  const pkg = workspace.get("@shardkit/test-db");
  if (!pkg) throw new TemplateBuildError("no workspace package @shardkit/test-db (tooling/test-db)");
  return pkg;
}

/** Where a template's copy of @shardkit/test-db goes, and the file of tooling/test-db it is. */
export const TEST_DB_FILES = { "src/test/test-db.js": "index.js", "src/test/test-db.d.ts": "index.d.ts" };

/**
 * The template's src/test/test-db.js and .d.ts: tooling/test-db's index.js and index.d.ts as they
 * are, so the templates' tests run on the very helpers the repository's tests run on. Checked: the
 * two export the same names, and every name the app imports from @shardkit/test-db. With them,
 * each other entry the app imports (`@shardkit/test-db/<entry>`, in package.json's `exports`) as
 * src/test/<entry>.js and .d.ts, the entry's files as they are.
 */
export function testDbFiles(
  workspace: Map<string, WorkspacePackage>,
  app: string,
  imported: Iterable<string>,
  entries: Iterable<string> = [],
): TemplateFiles {
  const pkg = testDbPackage(workspace);
  const files: TemplateFiles = new Map();
  for (const [target, source] of Object.entries(TEST_DB_FILES))
    files.set(target, readFileSync(join(pkg.dir, source), "utf8"));
  const code = exportedNames(files.get("src/test/test-db.js")!);
  const types = exportedNames(files.get("src/test/test-db.d.ts")!);
  const untyped = [...code].filter((name) => !types.has(name));
  const absent = [...types].filter((name) => !code.has(name));
  if (untyped.length > 0 || absent.length > 0)
    throw new TemplateBuildError(
      `tooling/test-db: index.js and index.d.ts do not export the same names (${[
        ...untyped.map((n) => `${n} has no declaration`),
        ...absent.map((n) => `${n} is declared but not exported`),
      ].join(", ")})`,
    );
  const missing = [...imported].filter((name) => !code.has(name));
  if (missing.length > 0)
    throw new TemplateBuildError(
      `apps/${app} imports ${missing.join(", ")} from @shardkit/test-db, which tooling/test-db does not export`,
    );
  const entryList = [...entries];
  const exports =
    entryList.length === 0
      ? undefined
      : readJson<{ exports?: Record<string, { types?: string; default?: string }> }>(
          join(pkg.dir, "package.json"),
        ).exports;
  for (const entry of entryList) {
    const { types, default: code } = exports?.[`./${entry}`] ?? {};
    if (!types || !code)
      throw new TemplateBuildError(
        `apps/${app} imports @shardkit/test-db/${entry}, which tooling/test-db does not export (with its types)`,
      );
    files.set(`src/test/${entry}.js`, readFileSync(join(pkg.dir, code), "utf8"));
    files.set(`src/test/${entry}.d.ts`, readFileSync(join(pkg.dir, types), "utf8"));
  }
  return files;
}

/**
 * The template's scripts/prisma-generate.mjs: the file of tooling/test-db's `shardkit-prisma-generate`
 * bin as it is (what every package and app of the repository generates its client with), so a
 * project generates its client as the repository does. Nothing in it differs outside the workspace:
 * it finds the Prisma CLI of the package it runs in and names itself by its path.
 */
export function prismaGenerateFile(workspace: Map<string, WorkspacePackage>): string {
  const pkg = testDbPackage(workspace);
  const bin = readJson<Manifest>(join(pkg.dir, "package.json")).bin?.[PRISMA_GENERATE.bin];
  if (!bin) throw new TemplateBuildError(`tooling/test-db: package.json has no bin ${PRISMA_GENERATE.bin}`);
  return readFileSync(join(pkg.dir, bin), "utf8");
}

/** What an app's own files use of the private packages, found while copying them. */
interface AppFiles {
  files: TemplateFiles;
  /** Names the app imports from @shardkit/test-db, and its other entries it imports. */
  testDbImports: Set<string>;
  testDbEntries: Set<string>;
  /** The entries of @shardkit/service-kit the app imports. */
  kitEntries: Set<string>;
  /** Whether a test makes a PostgreSQL server of its own. */
  server: boolean;
}

/** The app's files as the template's (imports of the private packages made local), and what they use of those. */
function appFiles(appDir: string, app: string): AppFiles {
  const found: AppFiles = {
    files: new Map(),
    testDbImports: new Set(),
    testDbEntries: new Set(),
    kitEntries: new Set(),
    server: false,
  };
  for (const path of walk(appDir)) {
    if (REPLACED.has(path)) continue;
    const text = readFileSync(join(appDir, path), "utf8");
    if (text.includes("\0"))
      throw new TemplateBuildError(`apps/${app}/${path}: binary files are not supported`);
    let out = text;
    if (/\.(ts|mts|cts|js|mjs)$/.test(path)) {
      for (const m of text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*["']@shardkit\/test-db["']/g))
        for (const name of m[1]!.split(",")) {
          const id = name
            .replace(/^\s*type\s+/, "")
            .split(/\s+as\s+/)[0]!
            .trim();
          if (id) found.testDbImports.add(id);
        }
      for (const m of text.matchAll(/["']@shardkit\/test-db\/([\w-]+)["']/g)) found.testDbEntries.add(m[1]!);
      if (TEST_CLUSTER.test(text)) found.server = true;
      for (const entry of serviceKitEntries(text)) found.kitEntries.add(entry);
      out = localServiceKit(path, localTestDb(path, text));
    }
    found.files.set(path, out);
  }
  return found;
}

/** Adds the template's copies of a private package's files; an app file in their place is an error. */
function addCopies(
  files: TemplateFiles,
  app: string,
  pkg: string,
  copies: TemplateFiles,
  taken: string[] = [],
) {
  for (const path of [...taken, ...copies.keys()])
    if (files.has(path))
      throw new TemplateBuildError(`apps/${app}/${path}: the template's copy of ${pkg} goes there`);
  for (const [path, text] of copies) files.set(path, text);
}

/** The checks of a template: nothing of the repository is left, and every import is declared. */
function checkTemplate(app: string, files: TemplateFiles, manifest: Manifest): void {
  const problems: string[] = [];
  for (const [path, text] of files) {
    for (const [pattern, what] of FORBIDDEN) {
      const m = pattern.exec(text);
      if (m) {
        const line = text.slice(0, m.index).split("\n").length;
        problems.push(`${path}:${line}: ${what}: ${text.split("\n")[line - 1]!.trim()}`);
      }
    }
    if (/\.(ts|mts|cts|js|mjs)$/.test(path)) {
      const declared = { ...manifest.dependencies, ...manifest.devDependencies };
      for (const pkg of importedPackages(text))
        if (!declared[pkg]) problems.push(`${path}: imports ${pkg}, which package.json does not declare`);
    }
  }
  if (problems.length > 0)
    throw new TemplateBuildError(`the ${app} template (from apps/${app}):\n  ${problems.join("\n  ")}`);
}

/** Every file of the template made from `apps/<app>`, checked (see the module's comment). */
export async function buildTemplate(app: string, repo = repoRoot): Promise<TemplateFiles> {
  const appDir = join(repo, "apps", app);
  const workspace = workspacePackages(repo);
  const appManifest = readJson<Manifest>(join(appDir, "package.json"));
  const { manifest, removed } = templateManifest(appManifest, {
    workspace,
    root: readJson<Manifest>(join(repo, "package.json")),
    allowScripts: allowedScripts(repo),
  });

  const { files, testDbImports, testDbEntries, kitEntries, server } = appFiles(appDir, app);
  if (removed.includes("@shardkit/test-db")) {
    const copies = testDbFiles(workspace, app, testDbImports, testDbEntries);
    addCopies(files, app, "@shardkit/test-db", copies, ["src/test/test-db.ts"]);
  }
  if (removed.includes(SERVICE_KIT.name)) {
    const kit = workspace.get(SERVICE_KIT.name);
    if (!kit) throw new TemplateBuildError(`no workspace package ${SERVICE_KIT.name} (tooling/service-kit)`);
    const problem = (message: string) => new TemplateBuildError(message);
    addCopies(files, app, SERVICE_KIT.name, serviceKitFiles(kit.dir, app, kitEntries, problem));
  }
  if (Object.values(manifest.scripts ?? {}).some((command) => command.includes(PRISMA_GENERATE.target)))
    files.set(PRISMA_GENERATE.target, prismaGenerateFile(workspace));
  files.set("gitignore", readFileSync(join(templateFiles, "gitignore"), "utf8"));
  files.set("package.json", formatJson(manifest));
  files.set("tsconfig.json", formatJson(standaloneTsconfig(join(appDir, "tsconfig.json"), workspace)));
  files.set("vitest.config.ts", await standaloneVitestConfig(appDir));
  const readme = existsSync(join(appDir, "README.md")) ? readFileSync(join(appDir, "README.md"), "utf8") : "";
  files.set("README.md", templateReadme(app, manifest, readme, server));
  checkTemplate(app, files, manifest);
  return files;
}

/** Writes `files` under `dir`, file by file (each written whole, then renamed), removing files no longer in it. */
export function syncDir(dir: string, files: TemplateFiles): void {
  mkdirSync(dir, { recursive: true });
  const existing = existsSync(dir) ? walkAll(dir) : [];
  for (const path of existing) if (!files.has(path)) rmSync(join(dir, path), { force: true });
  for (const [path, text] of files) {
    const target = join(dir, path);
    if (existsSync(target) && readFileSync(target, "utf8") === text) continue;
    mkdirSync(dirname(target), { recursive: true });
    const temp = `${target}.${process.pid}.tmp`;
    writeFileSync(temp, text);
    renameSync(temp, target);
  }
  removeEmptyDirs(dir);
}

function walkAll(dir: string, base = ""): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const rel = base ? `${base}/${entry}` : entry;
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? walkAll(path, rel) : [rel];
  });
}

function removeEmptyDirs(dir: string): boolean {
  let empty = true;
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory() && removeEmptyDirs(path)) rmSync(path, { recursive: true, force: true });
    else empty = false;
  }
  return empty;
}

/**
 * What differs between `outDir` and the templates the build makes now (a file missing, extra or
 * different, a template of no app), one line each; empty when `outDir` is current. Writes nothing.
 */
export async function staleTemplates(
  outDir = join(packageDir, "templates"),
  repo = repoRoot,
): Promise<string[]> {
  const names = templateNames(repo);
  const stale: string[] = [];
  const shipped = existsSync(outDir) ? readdirSync(outDir) : [];
  for (const entry of shipped)
    if (!names.includes(entry)) stale.push(`templates/${entry}: no app of that name`);
  for (const name of names) {
    const files = await buildTemplate(name, repo);
    const dir = join(outDir, name);
    const present = existsSync(dir) ? walkAll(dir) : [];
    for (const path of present)
      if (!files.has(path)) stale.push(`templates/${name}/${path}: not made by the build`);
    for (const [path, text] of files) {
      const target = join(dir, path);
      if (!existsSync(target)) stale.push(`templates/${name}/${path}: missing`);
      else if (readFileSync(target, "utf8") !== text) stale.push(`templates/${name}/${path}: differs`);
    }
  }
  return stale;
}

/** Builds every template into `outDir/<name>/` (templates of apps that no longer exist are removed). */
export async function writeTemplates(outDir = join(packageDir, "templates"), repo = repoRoot) {
  const names = templateNames(repo);
  const built = await Promise.all(
    names.map(async (name) => [name, await buildTemplate(name, repo)] as const),
  );
  mkdirSync(outDir, { recursive: true });
  for (const entry of readdirSync(outDir))
    if (!names.includes(entry)) rmSync(join(outDir, entry), { recursive: true, force: true });
  for (const [name, files] of built) syncDir(join(outDir, name), files);
  return built.map(([name, files]) => ({ name, files: files.size, dir: relative(repo, join(outDir, name)) }));
}
