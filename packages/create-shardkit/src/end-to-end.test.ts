// Each template as a user gets it: the packed create-shardkit run the way `npm create` runs it (npm
// exec of the package), with --packages pointing at packed @shardkit tarballs, into a folder outside
// the workspace; then, in that folder, `npm install`, `npm test`, the demo's test (what `npm run
// demo` runs, and all it prints) and `npm run typecheck`, with nothing of the workspace on the PATH
// or in reach of Node's module resolution. The templates run at the same time (one vitest worker:
// their commands are child processes).
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { delimiter, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { END_TO_END } from "@shardkit/vitest-config";
import { catalogVersion, inDependencyOrder, packWorkspacePackages } from "@shardkit/vitest-config/quality";
import pLimit from "p-limit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// tooling/test-db is what every template ships as src/test/test-db.js (copied unchanged).
import { patient, serverPort, whyNoClusters } from "../../../tooling/test-db/index.js";
import { listTemplates } from "./templates.js";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
const templates = listTemplates(join(pkgDir, "templates")).map((t) => t.name);

/**
 * The tests each template runs as a user would (`npm test -- <files>`): its test setup standing
 * alone (the global setup, test-db, a database, its own second server where it has one). Each file
 * is the app's own, run in full by the repository's suite (the templates are built from the apps,
 * file for file: templates.test.ts), so the end-to-end run does not run the suites a second time.
 */
const SMOKE: Record<string, { files: string[]; server: boolean }> = {
  // Its tests that stop a second server (degraded.test.ts, schema.test.ts) run in the repository's
  // suite; the skip check below runs them here without one.
  wallet: { files: ["src/http.test.ts"], server: false },
  orders: { files: ["src/http.test.ts", "src/credit.test.ts", "src/schema.test.ts"], server: true },
  // Its second server is the live move's, in demo-postgres.test.ts (the skip check below runs it without).
  // And its hostile-input test: src/test/hostile.js (tooling/test-db's, with fast-check) standing alone.
  allocations: { files: ["src/server.test.ts", "src/hostile.test.ts"], server: false },
};
/**
 * A test of each template that needs a second server, run where the tests may not make one, beside
 * the app's `END_TO_END` files: the demo's test, which runs `src/demo.ts` as `npm run demo` does and
 * checks all it prints (the repository's suite leaves it to this run).
 */
const SKIP_CHECK: Record<string, { args: string[]; says: RegExp }> = {
  wallet: {
    args: ["src/degraded.test.ts", "src/schema.test.ts"],
    says: /skipping the tests that stop a second PostgreSQL server: cannot make PostgreSQL server .+: SHARDKIT_TEST_NO_CLUSTERS is set/,
  },
  allocations: {
    args: ["src/demo-postgres.test.ts"],
    says: /skipping the live move on PostgreSQL: cannot make PostgreSQL server .+: SHARDKIT_TEST_NO_CLUSTERS is set/,
  },
};

interface Result {
  code: number | null;
  output: string;
  seconds: number;
}

/** The environment of a user's shell: nothing of this workspace or of the vitest and pnpm running this test. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env))
    if (
      /^(VITEST|npm_lifecycle_|npm_package_|PNPM_)/.test(key) ||
      [
        "npm_execpath",
        "npm_node_execpath",
        "npm_command",
        "npm_config_user_agent",
        "INIT_CWD",
        "NODE_ENV",
        "TEST",
      ].includes(key) ||
      key.startsWith("SHARDKIT_")
    )
      delete env[key];
  env.PATH = (env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => relative(repoRoot, dir).startsWith(".."))
    .join(delimiter);
  delete env.FORCE_COLOR; // any value of it turns colours on in vitest
  return { ...env, NO_COLOR: "1", ...extra };
}

/** Runs a command in its own process group; kills the group after `timeoutMs`. */
function sh(cmd: string, args: string[], cwd: string, timeoutMs: number, env = userEnv()): Promise<Result> {
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      output += `\n[killed: ${cmd} ${args.join(" ")} took more than ${timeoutMs / 1000} s]`;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {}
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes
      output = output.replace(/\u001b\[[0-9;]*m/g, "");
      done({ code, output, seconds: Math.round((Date.now() - started) / 1000) });
    });
  });
}

// The templates' test suites hold concurrent work to deadlines of a few seconds (a call that waits
// longer is a 503): a suite needs about two cores to itself, so on two cores they run one at a time.
// The installs run one at a time, so that the first suite starts early; the other templates install,
// and those whose tests are done run their typecheck, while a suite runs.
const suites = pLimit(Math.min(3, Math.max(1, Math.floor(availableParallelism() / 2))));
const installs = pLimit(1);

const tail = (r: Result, lines = 60) => r.output.split("\n").slice(-lines).join("\n");

/** Clusters of this file's runs (`cs_<template>_<pid>`); those of runs no longer alive are dropped first. */
function dropClusters(which: (name: string, pid: number) => boolean) {
  if (whyNoClusters()) return;
  const lines = execFileSync("pg_lsclusters", ["--no-header"], { encoding: "utf8" }).split("\n");
  for (const line of lines) {
    const [version, name] = line.trim().split(/\s+/);
    const m = /^cs_[a-z]+_(\d+)$/.exec(name ?? "");
    if (!version || !m || !which(name!, Number(m[1]))) continue;
    try {
      execFileSync("pg_dropcluster", [version, name!, "--stop"], { stdio: "ignore", timeout: 60_000 });
      // What pg_dropcluster leaves: the configuration folder, which holds test-db's conf.d/shardkit.conf.
      rmSync(`/etc/postgresql/${version}/${name}`, { recursive: true, force: true });
    } catch {}
  }
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** The workspace packages the templates depend on, and theirs, in dependency order. */
function shardkitPackages(): string[] {
  const names = templates.flatMap((t) => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, "templates", t, "package.json"), "utf8"));
    return Object.keys(pkg.dependencies ?? {}).filter((dep) => dep.startsWith("@shardkit/"));
  });
  return inDependencyOrder([...names, "@shardkit/id"]); // @shardkit/id: create-shardkit's own
}

const work = mkdtempSync(join(tmpdir(), "create-shardkit-e2e-"));
const tarballs = join(work, "packages");
let createTgz = "";
let idTgz = "";
const why = whyNoClusters();
const clusters = new Map<string, string>();

/**
 * `npm create shardkit@latest <name> -- --template <template>` as npm runs it (npm exec of the
 * package), with this package's own dependency from its tarball (it is not in the registry yet), the
 * @shardkit packages from theirs, and no install.
 */
function create(name: string, template: string): Promise<Result> {
  return sh(
    "npm",
    [
      "exec",
      "--yes",
      `--package=${idTgz}`,
      `--package=${createTgz}`,
      "--",
      "create-shardkit",
      name,
      "--template",
      template,
      "--packages",
      tarballs,
      "--no-install",
    ],
    work,
    120_000,
  );
}

/**
 * The project `my-<template>` as written (its manifest as a user's, with the @shardkit packages from
 * their tarballs), then its `npm install` as quality.js's npmInstall runs it (quiet, no audit, from
 * npm's cache when it can), but without blocking: the other templates' commands go on meanwhile.
 */
async function checkedInstall(template: string, dir: string): Promise<Result> {
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  expect(pkg.name).toBe(`my-${template}`);
  expect(JSON.stringify(pkg)).not.toMatch(/catalog:|workspace:|@shardkit\/(test-db|tsconfig|vitest-config)/);
  expect(pkg.devDependencies.prisma).toBe(catalogVersion("prisma"));
  for (const [dep, spec] of Object.entries<string>(pkg.dependencies))
    if (dep.startsWith("@shardkit/"))
      expect(spec, dep).toMatch(/^file:\.\.\/packages\/shardkit-[a-z]+-[\d.]+\.tgz$/);
  const install = await installs(() =>
    sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], dir, 300_000),
  );
  expect(install.code, `npm install (${install.seconds} s):\n${tail(install)}`).toBe(0);
  expect(existsSync(join(dir, "src/generated/prisma/client.ts")), "npm install generates the client").toBe(
    true,
  );
  return install;
}

beforeAll(async () => {
  dropClusters((_, pid) => !alive(pid));
  mkdirSync(tarballs);
  for (const file of packWorkspacePackages([...shardkitPackages(), pkgDir], work)) {
    const target = join(tarballs, file.split("/").at(-1)!);
    renameSync(file, target);
    if (target.includes("create-shardkit-")) createTgz = target;
    if (target.includes("shardkit-id-")) idTgz = target;
  }
  for (const t of templates) clusters.set(t, `cs_${t}_${process.pid}:${await serverPort()}`);
  for (const t of templates) {
    const created = await create(`my-${t}`, t);
    if (created.code !== 0) throw new Error(`create-shardkit my-${t} --template ${t}:\n${tail(created)}`);
  }
}, patient(300_000));

afterAll(() => {
  dropClusters((name) => [...clusters.values()].some((c) => c.startsWith(`${name}:`)));
  if (!process.env.SHARDKIT_KEEP_PACK) rmSync(work, { recursive: true, force: true });
}, patient(120_000));

describe("npm create shardkit@latest my-x -- --template x, then npm install, npm test, npm run typecheck", () => {
  it("one template per reference service", () => {
    expect(templates).toEqual(readdirSync(join(repoRoot, "apps")).sort());
  });

  it.concurrent.each(templates)(
    "%s: a standalone project whose install, tests, demo and typecheck pass",
    async (template) => {
      const dir = join(work, `my-${template}`);
      const install = await checkedInstall(template, dir);
      // Then, one after the other (vitest runs in one folder share a temporary tsconfig): the tests, a
      // run where the tests may not make PostgreSQL servers (with the demo's), and the typecheck.
      const env = userEnv({ SHARDKIT_TEST_CLUSTER: clusters.get(template)! });
      const { files, server } = SMOKE[template]!;
      for (const file of files) expect(existsSync(join(dir, file)), file).toBe(true);
      const test = await suites(() => sh("npm", ["test", "--", ...files], dir, 420_000, env));
      expect(test.code, `npm test (${test.seconds} s):\n${tail(test)}`).toBe(0);
      expect(test.output).toMatch(new RegExp(`Test Files +${files.length} passed \\(${files.length}\\)`));
      if (why && server) expect(test.output).toContain(why);
      else expect(test.output).not.toMatch(/skipping/);

      // The demo (on embedded databases: no server) and the tests that would stop a second server,
      // with none to be had: those say why they skip. Outside the suites' turns: one process's demo.
      const skipCheck = SKIP_CHECK[template];
      const alone = [...END_TO_END, ...(skipCheck?.args ?? [])];
      for (const file of alone) expect(existsSync(join(dir, file)), file).toBe(true);
      const noServer = await sh(
        "npx",
        ["vitest", "run", ...alone, "--reporter=verbose", "--typecheck.enabled=false"],
        dir,
        300_000,
        { ...env, SHARDKIT_TEST_NO_CLUSTERS: "1" },
      );
      expect(noServer.code, `the demo's test and tests without a server:\n${tail(noServer)}`).toBe(0);
      for (const file of END_TO_END)
        expect(noServer.output, file).toMatch(new RegExp(`✓ ${file.replaceAll(".", "\\.")} > `));
      if (skipCheck) {
        expect(noServer.output).toMatch(skipCheck.says);
        expect(noServer.output).toMatch(/\d+ skipped/);
      }
      // The demo's test ran what `npm run demo` runs.
      const { scripts } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      expect(scripts.demo).toBe("tsx src/demo.ts");

      const typecheck = await sh("npm", ["run", "typecheck"], dir, 180_000);
      expect(typecheck.code, `npm run typecheck:\n${tail(typecheck)}`).toBe(0);

      // What the install, the tests and the demo wrote is ignored by git; the project's own files are not.
      execFileSync("git", ["init", "-q"], { cwd: dir });
      const untracked = execFileSync("git", ["status", "--porcelain", "--untracked-files=all"], {
        cwd: dir,
        encoding: "utf8",
      })
        .split("\n")
        .filter(Boolean)
        .map((line) => line.slice(3));
      expect(untracked.filter((f) => /^(node_modules|src\/generated|\.data)\//.test(f))).toEqual([]);
      expect(untracked).toEqual(
        expect.arrayContaining([
          ".gitignore",
          "package-lock.json",
          "src/test/test-db.js",
          "src/test/test-db.d.ts",
        ]),
      );
      console.log(
        `${template}: npm install ${install.seconds} s, npm test ${test.seconds} s, the demo's test and tests without a server ${noServer.seconds} s, typecheck ${typecheck.seconds} s`,
      );
    },
    patient(1_200_000),
  );
});
