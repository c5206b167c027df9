import { spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, join, relative, resolve, sep } from "node:path";
import {
  InstallFailedError,
  InvalidProjectNameError,
  TargetNotEmptyError,
  UnknownTemplateError,
} from "./errors.js";
import { type LocalPackage, readPackagesDir } from "./tarballs.js";
import { defaultTemplatesDir, listTemplates } from "./templates.js";

/** What to create. */
export interface ScaffoldOptions {
  /** The project's folder: created, or an empty one. Its name is the package's name. */
  dir: string;
  /** One of {@link listTemplates}' names (`wallet`, `orders`, `allocations`). */
  template: string;
  /**
   * A folder of `.tgz` files (`npm pack` / `pnpm pack` output) to install `@shardkit` packages from,
   * for versions not released yet: the project's package.json points those dependencies at the
   * tarballs (`file:`), and `overrides` makes the packages that depend on them use them too.
   */
  packages?: string;
  /** Run `npm install` in the project (default true). */
  install?: boolean;
  /** What `dir` and `packages` are relative to (default: the process's working directory). */
  cwd?: string;
  /** Where the templates are (default: this package's `templates/`). */
  templatesDir?: string;
  /** Where `npm install` writes its output (default: this process's stdout and stderr). */
  installOutput?: "inherit" | "ignore";
}

/** What was created. */
export interface ScaffoldResult {
  /** The project's absolute path. */
  dir: string;
  /** Its package name. */
  name: string;
  template: string;
  /** Packages installed from `packages`' tarballs. */
  localPackages: LocalPackage[];
  installed: boolean;
  /** The commands to run next, from the current folder. */
  nextSteps: string[];
}

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  overrides?: Record<string, string>;
  [key: string]: unknown;
}

/** The npm package name a folder's name makes: lower case, other characters than `a-z 0-9 - . _ ~` as `-`. */
export function projectName(dir: string): string {
  const raw = basename(resolve(dir));
  const name = raw
    .toLowerCase()
    .replace(/[^a-z0-9._~-]+/g, "-")
    .replace(/^[._-]+/, "")
    .replace(/-+$/, "");
  if (name === "") throw new InvalidProjectNameError(raw, "no letter or digit in it");
  if (name.length > 214) throw new InvalidProjectNameError(raw, "more than 214 characters");
  if (name === "node_modules" || name === "favicon.ico")
    throw new InvalidProjectNameError(raw, "a reserved name");
  return name;
}

function copyTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from)) {
    const source = join(from, entry);
    // npm does not publish files named .gitignore: the templates ship it as `gitignore`.
    const target = join(to, entry === "gitignore" ? ".gitignore" : entry);
    if (statSync(source).isDirectory()) copyTree(source, target);
    else copyFileSync(source, target);
  }
}

/** `file:` spec of a tarball, relative to the project (so the project and its lockfile can move together). */
function fileSpec(projectDir: string, tarball: string): string {
  const rel = relative(projectDir, tarball).split(sep).join("/");
  return `file:${rel.startsWith(".") ? rel : `./${rel}`}`;
}

function npmInstall(dir: string, output: "inherit" | "ignore"): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn("npm", ["install"], {
      cwd: dir,
      stdio: output,
      shell: process.platform === "win32",
    });
    child.on("error", (err) => fail(new InstallFailedError(dir, err.message, { cause: err })));
    child.on("exit", (code, signal) =>
      code === 0
        ? done()
        : fail(new InstallFailedError(dir, signal ? `killed by ${signal}` : `exit code ${code}`)),
    );
  });
}

/**
 * Writes a new project from a template into `dir` and (unless `install: false`) runs `npm install`
 * in it. Nothing is written when the template is unknown, the folder is not empty or `packages` is
 * not a folder of package tarballs.
 */
export async function scaffold(options: ScaffoldOptions): Promise<ScaffoldResult> {
  const cwd = options.cwd ?? process.cwd();
  const templates = listTemplates(options.templatesDir ?? defaultTemplatesDir());
  const template = templates.find((t) => t.name === options.template);
  if (!template)
    throw new UnknownTemplateError(
      options.template,
      templates.map((t) => t.name),
    );
  const dir = resolve(cwd, options.dir);
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new TargetNotEmptyError(options.dir, "not a folder");
    if (readdirSync(dir).length > 0) throw new TargetNotEmptyError(options.dir, "not empty");
  }
  const name = projectName(dir);
  const localPackages = options.packages === undefined ? [] : readPackagesDir(resolve(cwd, options.packages));

  copyTree(template.dir, dir);
  const manifestPath = join(dir, "package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Manifest;
  manifest.name = name;
  if (localPackages.length > 0) {
    const specs = Object.fromEntries(localPackages.map((p) => [p.name, fileSpec(dir, p.file)]));
    for (const deps of [manifest.dependencies, manifest.devDependencies])
      for (const dep of Object.keys(deps ?? {})) if (specs[dep]) deps![dep] = specs[dep];
    // The packages that depend on these (@shardkit/prisma on @shardkit/id...) get the tarballs too.
    manifest.overrides = { ...manifest.overrides, ...specs };
  }
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  const readmePath = join(dir, "README.md");
  if (existsSync(readmePath))
    writeFileSync(readmePath, readFileSync(readmePath, "utf8").replaceAll("{{name}}", name));

  const install = options.install ?? true;
  if (install) await npmInstall(dir, options.installOutput ?? "inherit");
  const rel = relative(cwd, dir);
  const nextSteps = [
    ...(rel === "" ? [] : [`cd ${/\s/.test(rel) ? JSON.stringify(rel) : rel}`]),
    ...(install ? [] : ["npm install"]),
    "npm test",
    "npm run demo",
    "npm start",
  ];
  return { dir, name, template: template.name, localPackages, installed: install, nextSteps };
}
