import { execFileSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, posix, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const requireFromRepo = createRequire(join(repoRoot, "package.json"));
const bin = (name) => join(repoRoot, "node_modules/.bin", name);
const run = (cmd, args, cwd, timeoutMs) =>
  execFileSync(cmd, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, FORCE_COLOR: "0" },
    ...(timeoutMs ? { timeout: timeoutMs, killSignal: "SIGKILL" } : {}),
  });

/**
 * `npm install <args>` in `cwd` (quiet, no audit, from the cache when it can), as a user runs it.
 * Killed after `timeoutMs` (default 120 s): a registry that does not answer fails the test, never hangs it.
 * @param {string[]} args
 * @param {string} cwd
 * @param {{ timeoutMs?: number }} [options]
 */
export function npmInstall(args, cwd, options = {}) {
  return run(
    "npm",
    ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...args],
    cwd,
    options.timeoutMs ?? 120_000,
  );
}

/**
 * The folders of the packages named (those under `packages/`; others, such as tooling, are left
 * out) and of the packages under `packages/` they depend on, each once, dependencies first: the
 * order their tarballs install in.
 * @param {string[]} names package names, e.g. `["@shardkit/prisma"]`
 * @returns {string[]}
 */
export function inDependencyOrder(names) {
  const dirs = new Map();
  for (const entry of readdirSync(join(repoRoot, "packages"))) {
    const file = join(repoRoot, "packages", entry, "package.json");
    if (existsSync(file))
      dirs.set(JSON.parse(readFileSync(file, "utf8")).name, join(repoRoot, "packages", entry));
  }
  const order = [];
  const visit = (name) => {
    const dir = dirs.get(name);
    if (!dir || order.includes(dir)) return;
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep);
    order.push(dir);
  };
  for (const name of names) visit(name);
  return order;
}

/**
 * Packs workspace packages as they would be published (`pnpm pack` rewrites `workspace:` and
 * `catalog:`): one tarball per directory, each in its own folder under `dest`, in the order given.
 * With `SHARDKIT_PACK_CACHE` set (the repository's test run sets it to a folder of its own), each
 * package is packed once per run and every later call gets a copy of that tarball.
 * @param {string[]} dirs
 * @param {string} dest
 * @returns {string[]} the tarballs' paths
 */
export function packWorkspacePackages(dirs, dest) {
  const cache = process.env.SHARDKIT_PACK_CACHE;
  return dirs.map((dir) => {
    const out = mkdtempSync(join(dest, "tgz-"));
    if (!cache) return pack(dir, out);
    const kept = join(cache, basename(resolve(dir)));
    mkdirSync(kept, { recursive: true });
    let file = readdirSync(kept).find((f) => f.endsWith(".tgz"));
    if (!file) {
      // Packed aside, then renamed into place: a run beside this one never sees half a tarball.
      const packed = pack(dir, mkdtempSync(join(cache, "packing-")));
      renameSync(packed, join(kept, basename(packed)));
      file = basename(packed);
    }
    copyFileSync(join(kept, file), join(out, file));
    return join(out, file);
  });
}

function pack(dir, out) {
  run("pnpm", ["pack", "--pack-destination", out], dir, 120_000);
  const file = readdirSync(out).find((f) => f.endsWith(".tgz"));
  if (!file) throw new Error(`pnpm pack produced no tarball for ${dir}`);
  return join(out, file);
}

/**
 * The version the pnpm `catalog:` of pnpm-workspace.yaml pins for `name` (as written there:
 * `7.10.0`, `^8.16.0`). Throws when the catalog does not list it.
 * @param {string} name
 */
export function catalogVersion(name) {
  const yaml = readFileSync(join(repoRoot, "pnpm-workspace.yaml"), "utf8");
  const block = yaml.split(/^catalog:\s*$/m)[1]?.split(/^\S/m)[0] ?? "";
  for (const line of block.split("\n")) {
    const m = line.match(/^\s+("?)([^":#\s]+)\1:\s*([^\s#]+)/);
    if (m && m[2] === name) return m[3].replace(/^["']|["']$/g, "");
  }
  throw new Error(`the pnpm catalog (pnpm-workspace.yaml) pins no version of ${name}`);
}

/**
 * The TypeScript settings the declarations are compiled under: node16 from CommonJS (the `.d.cts`
 * files) and from ESM (the `.d.ts` files), each importing every entry. Whether each entry resolves
 * to declarations under every `moduleResolution` (node10, which ignores `exports` and needs
 * `typesVersions` for subpaths, node16 both ways, bundler), and every import inside them, is
 * are-the-types-wrong's check (`attw`, run on the same tarball); this is whether they compile.
 */
const TYPE_MODES = [
  { mode: "node16 (from CommonJS)", file: "index.cts", module: "node16", moduleResolution: "node16" },
  { mode: "node16 (from ESM)", file: "index.mts", module: "node16", moduleResolution: "node16" },
];

/** The import specifiers of a package's code entries (`exports` keys, without `./package.json`). */
function entriesOf(pkg) {
  const keys =
    typeof pkg.exports === "object" && !Array.isArray(pkg.exports) ? Object.keys(pkg.exports) : ["."];
  return keys
    .filter((key) => !key.endsWith(".json") && !key.includes("*"))
    .map((key) => (key === "." ? pkg.name : `${pkg.name}/${key.slice(2)}`));
}

/**
 * Type-checks a file importing every entry of package `name` under each of TYPE_MODES (strict), with
 * the TypeScript API in this process: one parse of the declaration files for all modes. Reports the
 * errors of that file and of the package's own declaration files (skipLibCheck off for them): each
 * entry must resolve to declarations (not `any`, not "cannot find module"), and so must every import
 * inside them.
 */
function checkTypes(app, name, entries) {
  const ts = requireFromRepo("typescript");
  const imports = entries.map((spec, i) => `import * as m${i} from ${JSON.stringify(spec)};`).join("\n");
  const source = `${imports}
type NotAny<T> = 0 extends 1 & T ? false : true;
export const typed: [${entries.map((_, i) => `NotAny<typeof m${i}>`).join(", ")}] = [${entries.map(() => "true").join(", ")}];
`;
  const own = `/node_modules/${name}/`;
  const parsed = new Map();
  const formatHost = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => app,
    getNewLine: () => "\n",
  };
  return Object.fromEntries(
    TYPE_MODES.map(({ mode, file, module, moduleResolution }, i) => {
      const dir = join(app, `types-${i}`);
      mkdirSync(dir);
      writeFileSync(join(dir, file), source);
      const compilerOptions = {
        module,
        moduleResolution,
        target: "es2022",
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        esModuleInterop: true,
        types: ["node"],
        typeRoots: [join(repoRoot, "node_modules/@types")],
      };
      // Written out so that `tsc -p` reproduces a failure (SHARDKIT_KEEP_PACK=1 keeps the folder).
      writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: [file] }));
      const { options } = ts.convertCompilerOptionsFromJson(compilerOptions, dir);
      const host = ts.createCompilerHost(options);
      const getSourceFile = host.getSourceFile.bind(host);
      host.getSourceFile = (fileName, how, ...rest) => {
        // A file is parsed once per format it is read as (an ES module or CommonJS, by node16's rules).
        const key = `${fileName}|${typeof how === "object" ? `${how.languageVersion}|${how.impliedNodeFormat}` : how}`;
        if (!parsed.has(key)) parsed.set(key, getSourceFile(fileName, how, ...rest));
        return parsed.get(key);
      };
      const root = join(dir, file);
      const program = ts.createProgram({ rootNames: [root], options, host });
      const checked = program
        .getSourceFiles()
        .filter((sf) => resolve(sf.fileName) === root || sf.fileName.includes(own));
      const diagnostics = [
        ...program.getOptionsDiagnostics(),
        ...program.getGlobalDiagnostics(),
        ...checked.flatMap((sf) => [
          ...program.getSyntacticDiagnostics(sf),
          ...program.getSemanticDiagnostics(sf),
        ]),
      ];
      const files = checked
        .map((sf) => sf.fileName.slice(sf.fileName.indexOf(own) + 1))
        .filter((f) => f !== root);
      return [
        mode,
        { ok: diagnostics.length === 0, output: ts.formatDiagnostics(diagnostics, formatHost), files },
      ];
    }),
  );
}

/**
 * Packs workspace packages as they would be published (`pnpm pack` rewrites `workspace:` and `catalog:`),
 * installs the tarballs and the package's optional peer dependencies into a throwaway npm project
 * outside the workspace in one `npm install`, as a user adds the package (its workspace dependencies,
 * `alsoPack`, from their tarballs), and reports what each module system sees. Runs publint --strict and are-the-types-wrong (every resolution mode,
 * node10 included) on the tarball of `pkgDir`.
 * Throws when an entry (every subpath of `exports`) does not load from both `import()` and `require()`
 * with the same exports, or its declarations do not compile from CommonJS and from ESM (TYPE_MODES).
 * @param {string} pkgDir the package under test
 * @param {{ alsoPack?: string[], scripts?: Record<string, string> }} [options] other workspace package dirs it depends on
 */
export function checkPublishedPackage(pkgDir, options = {}) {
  const work = mkdtempSync(join(tmpdir(), "shardkit-pack-"));
  try {
    const tarballs = packWorkspacePackages([pkgDir, ...(options.alsoPack ?? [])], work);
    const own = tarballs[0];
    const publint = run(bin("publint"), ["--strict", own], pkgDir);
    let attw;
    try {
      attw = { ok: true, output: run(bin("attw"), [own, "--format", "ascii"], pkgDir) };
    } catch (err) {
      attw = { ok: false, output: `${err.stdout ?? ""}${err.stderr ?? ""}` };
    }
    const app = join(work, "app");
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "pack-check", private: true, version: "0.0.0" }),
    );
    const pkg = JSON.parse(run("tar", ["-xzOf", own, "package/package.json"], work));
    const name = pkg.name;
    // What the README tells users to add for the optional parts, at the versions the package is tested with.
    const optionalPeers = Object.keys(pkg.peerDependenciesMeta ?? {})
      .filter((peer) => pkg.peerDependenciesMeta[peer]?.optional)
      .map((peer) => `${peer}@${pkg.devDependencies?.[peer] ?? pkg.peerDependencies[peer]}`);
    // One install, as a user's `npm install <package> <optional peers>` resolves them: the workspace
    // dependencies come from their tarballs (the registry has none of these versions).
    npmInstall([...tarballs.slice(1), own, ...optionalPeers], app);

    // One node process sees every entry from both module systems: `import()` first, then `require()`
    // (an ES module and a CommonJS file of a dual package are separate modules in node's two caches).
    const entryNames = entriesOf(pkg);
    const { esm: esmAll, cjs: cjsAll } = JSON.parse(
      run(
        "node",
        [
          "--input-type=module",
          "-e",
          `import { createRequire } from "node:module";
const require = createRequire(process.cwd() + "/");
const specs = ${JSON.stringify(entryNames)};
const out = { esm: {}, cjs: {} };
for (const s of specs) out.esm[s] = Object.keys(await import(s)).filter((k) => k !== "default").sort();
for (const s of specs) out.cjs[s] = Object.keys(require(s)).sort();
console.log(JSON.stringify(out));`,
        ],
        app,
      ),
    );
    const entries = Object.fromEntries(entryNames.map((s) => [s, { esm: esmAll[s], cjs: cjsAll[s] }]));
    const types = checkTypes(app, name, entryNames);

    // Files of the package the README tells users to use (`examples/...`, `schema/...`) must ship in it.
    const shipped = new Set(run("tar", ["-tzf", own], work).split("\n"));
    const readme = shipped.has("package/README.md")
      ? run("tar", ["-xzOf", own, "package/README.md"], work)
      : "";
    const referenced = [
      ...new Set(readme.match(/(?<![\w./-])(?:examples|schema)\/[\w.-]+(?:\/[\w.-]+)*/g) ?? []),
    ]
      .map((ref) => ref.replace(/\.+$/, ""))
      .filter((ref) => /\.\w+$/.test(ref));

    // Links of the README and of shipped Markdown files must work from the installed package: a
    // relative link names a file of the tarball (`../../docs/x.md` in the repository does not).
    const brokenLinks = [...shipped]
      .filter((file) => file.endsWith(".md"))
      .flatMap((file) => {
        const text = run("tar", ["-xzOf", own, file], work);
        return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
          .map((m) => m[1])
          .filter((target) => !/^(?:[a-z][\w+.-]*:|#)/i.test(target))
          .map((target) => ({
            file,
            target,
            path: posix.join(posix.dirname(file), target.replace(/#.*$/, "")),
          }))
          .filter(({ path }) => !shipped.has(path));
      });

    const problems = [
      ...brokenLinks.map(
        ({ file, target }) =>
          `${file.slice("package/".length)} links to ${target}, which is not in the package`,
      ),
      ...referenced
        .filter((ref) => !shipped.has(`package/${ref}`))
        .map((ref) => `the README refers to ${ref}, which is not in the package (its "files")`),
      ...entryNames
        .filter((s) => JSON.stringify(esmAll[s]) !== JSON.stringify(cjsAll[s]))
        .map((s) => `${s}: import() sees [${esmAll[s]}], require() sees [${cjsAll[s]}]`),
      ...Object.entries(types)
        .filter(([, r]) => !r.ok)
        .map(([mode, r]) => `types under moduleResolution ${mode}:\n${r.output}`),
    ];
    if (problems.length > 0)
      throw new Error(`${name} as installed from its tarball:\n${problems.join("\n")}`);

    // Extra ES module scripts run in the fresh project (e.g. subpath entries sharing classes): their output.
    const scripts = Object.fromEntries(
      Object.entries(options.scripts ?? {}).map(([key, code]) => [
        key,
        run("node", ["--input-type=module", "-e", code], app).trim(),
      ]),
    );
    return {
      name,
      publint,
      attw,
      esm: esmAll[name],
      cjs: cjsAll[name],
      entries,
      types,
      scripts,
      appDir: app,
    };
  } finally {
    if (!process.env.SHARDKIT_KEEP_PACK) rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The values a source entry exports (`src/index.ts`: named re-exports and exported declarations,
 * type-only ones left out), sorted: what the packed entry must expose from `import()` and `require()`.
 * An `export *` is refused: an entry names every export.
 * @param {string} file
 * @returns {string[]}
 */
export function valueExportsOf(file) {
  const ts = requireFromRepo("typescript");
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const names = [];
  const exported = (node) =>
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const node of source.statements) {
    if (ts.isExportDeclaration(node)) {
      if (node.isTypeOnly) continue;
      if (!node.exportClause || !ts.isNamedExports(node.exportClause))
        throw new Error(`${file}: \`export *\` hides what the entry exports; name each export`);
      for (const element of node.exportClause.elements)
        if (!element.isTypeOnly) names.push(element.name.text);
    } else if (exported(node)) {
      if (
        (ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node) || ts.isEnumDeclaration(node)) &&
        node.name
      )
        names.push(node.name.text);
      else if (ts.isVariableStatement(node))
        for (const declaration of node.declarationList.declarations)
          names.push(declaration.name.getText(source));
    }
  }
  return names.sort();
}
