import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ExitCode, run } from "./run.js";
import { readPackagesDir } from "./tarballs.js";
import { listTemplates } from "./templates.js";

const work = mkdtempSync(join(tmpdir(), "create-shardkit-run-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;
const fresh = (name = "svc") => join(mkdtempSync(join(work, `case-${n++}-`)), name);

/** `run` with captured output, in `cwd`. */
async function cli(argv: string[], cwd = work) {
  let stdout = "";
  let stderr = "";
  const code = await run(argv, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    cwd,
    installOutput: "ignore",
  });
  return { code, stdout, stderr };
}

/** A gzipped npm tarball of a package.json (`tar`, as `npm pack` makes them: under `package/`). */
function tarball(dir: string, manifest: Record<string, unknown>, file: string) {
  const src = mkdtempSync(join(work, "pkg-"));
  mkdirSync(join(src, "package"));
  writeFileSync(join(src, "package", "package.json"), JSON.stringify(manifest));
  mkdirSync(dir, { recursive: true });
  execFileSync("tar", ["-czf", join(dir, file), "-C", src, "package"]);
}

const templates = listTemplates().map((t) => t.name);

describe("create-shardkit <dir> --template <name>", () => {
  it("ships a template for every reference service", () => {
    expect(templates).toEqual(["allocations", "orders", "wallet"]);
  });

  it("--help lists the templates with what they are, --version prints the version", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(ExitCode.OK);
    for (const t of listTemplates()) expect(help.stdout).toContain(`  ${t.name.padEnd(12)} ${t.description}`);
    expect(help.stdout).toContain("npm create shardkit@latest my-service -- --template wallet");
    expect(help.stdout).toMatch(/--packages <dir> +install the @shardkit packages from the \.tgz files/);
    const version = await cli(["--version"]);
    expect(version.stdout.trim()).toBe(
      JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version,
    );
  });

  it.each(templates)(
    "writes the %s template as a project of its own, named after its folder",
    async (template) => {
      const dir = fresh("My Service");
      const { code, stdout, stderr } = await cli([dir, "--template", template, "--no-install"]);
      expect(stderr).toBe("");
      expect(code).toBe(ExitCode.OK);
      expect(stdout).toContain(`Created my-service from the ${template} template in ${dir}.`);
      expect(stdout).toMatch(
        /Next:\n {2}cd ".+My Service"\n {2}npm install +# also generates the Prisma client\n {2}npm test +#/,
      );
      const files = readdirSync(dir).sort();
      expect(files).toEqual(
        [
          ".gitignore",
          "README.md",
          "package.json",
          "prisma",
          "scripts",
          "src",
          "tsconfig.json",
          "vitest.config.ts",
        ].sort(),
      );
      expect(readFileSync(join(dir, ".gitignore"), "utf8")).toMatch(/^node_modules\/$/m);
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      expect(pkg.name).toBe("my-service");
      expect(pkg.overrides).toBeUndefined();
      const readme = readFileSync(join(dir, "README.md"), "utf8");
      expect(readme).toMatch(/^# my-service\n/);
      expect(readme).not.toContain("{{name}}");
    },
  );

  it("writes into an empty folder that exists, and `.` is the current folder", async () => {
    const dir = fresh("empty");
    mkdirSync(dir);
    const { code } = await cli([".", "--template", "orders", "--no-install"], dir);
    expect(code).toBe(ExitCode.OK);
    expect(JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).name).toBe("empty");
  });

  it("refuses an unknown template, a folder that is not empty, a missing --template: exit code 2, nothing written", async () => {
    const dir = fresh();
    const unknown = await cli([dir, "--template", "ledger", "--no-install"]);
    expect([unknown.code, unknown.stderr]).toEqual([
      ExitCode.USAGE,
      'create-shardkit: unknown template "ledger": the templates are allocations, orders, wallet\n',
    ]);
    expect(existsSync(dir)).toBe(false);

    mkdirSync(dir);
    writeFileSync(join(dir, "notes.txt"), "mine");
    const full = await cli([dir, "--template", "wallet", "--no-install"]);
    expect(full.code).toBe(ExitCode.USAGE);
    expect(full.stderr).toBe(
      `create-shardkit: ${dir} exists and is not empty: choose a new folder, or empty this one (nothing was written)\n`,
    );
    expect(readdirSync(dir)).toEqual(["notes.txt"]);

    const file = await cli([join(dir, "notes.txt"), "--template", "wallet", "--no-install"]);
    expect(file.stderr).toMatch(/notes\.txt exists and is not a folder/);

    const missing = await cli([fresh()]);
    expect(missing.code).toBe(ExitCode.USAGE);
    expect(missing.stderr).toMatch(/required option '-t, --template <name>' not specified/);
    const noDir = await cli(["--template", "wallet"]);
    expect(noDir.code).toBe(ExitCode.USAGE);
    expect(noDir.stderr).toMatch(/missing required argument 'dir'/);
  });

  it("--packages points the @shardkit dependencies at the tarballs (file:, relative) and overrides them for the packages that use them", async () => {
    const tgz = join(work, "tarballs");
    tarball(tgz, { name: "@shardkit/id", version: "0.2.0-next.1" }, "shardkit-id-0.2.0-next.1.tgz");
    tarball(tgz, { name: "@shardkit/prisma", version: "0.2.0-next.1" }, "shardkit-prisma-0.2.0-next.1.tgz");
    tarball(tgz, { name: "@shardkit/scatter", version: "0.2.0-next.1" }, "shardkit-scatter-0.2.0-next.1.tgz");
    tarball(tgz, { name: "left-pad", version: "1.0.0" }, "left-pad-1.0.0.tgz");
    expect(readPackagesDir(tgz).map((p) => `${p.name}@${p.version}`)).toEqual([
      "@shardkit/id@0.2.0-next.1",
      "@shardkit/prisma@0.2.0-next.1",
      "@shardkit/scatter@0.2.0-next.1",
    ]);
    const dir = join(work, "with-packages");
    const { code, stdout } = await cli([
      "with-packages",
      "--template",
      "wallet",
      "--packages",
      "tarballs",
      "--no-install",
    ]);
    expect(code).toBe(ExitCode.OK);
    expect(stdout).toContain(
      "From local tarballs: @shardkit/id@0.2.0-next.1, @shardkit/prisma@0.2.0-next.1, @shardkit/scatter@0.2.0-next.1.",
    );
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    expect(pkg.dependencies["@shardkit/id"]).toBe("file:../tarballs/shardkit-id-0.2.0-next.1.tgz");
    expect(pkg.dependencies["@shardkit/prisma"]).toBe("file:../tarballs/shardkit-prisma-0.2.0-next.1.tgz");
    expect(pkg.dependencies["@shardkit/selector"]).toMatch(/^\^\d+\.\d+\.\d+/); // no tarball of it: the registry's
    expect(pkg.overrides).toEqual({
      "@shardkit/id": "file:../tarballs/shardkit-id-0.2.0-next.1.tgz",
      "@shardkit/prisma": "file:../tarballs/shardkit-prisma-0.2.0-next.1.tgz",
      "@shardkit/scatter": "file:../tarballs/shardkit-scatter-0.2.0-next.1.tgz",
    });
  });

  it("refuses a --packages folder that is missing, has no tarballs, or a broken one", async () => {
    const none = await cli([fresh(), "--template", "wallet", "--packages", "nowhere", "--no-install"]);
    expect([none.code, none.stderr]).toEqual([
      ExitCode.USAGE,
      `create-shardkit: --packages ${join(work, "nowhere")}: no such folder\n`,
    ]);
    const empty = mkdtempSync(join(work, "empty-"));
    const noTgz = await cli([fresh(), "--template", "wallet", "--packages", empty, "--no-install"]);
    expect(noTgz.stderr).toMatch(/no \.tgz files in it \(npm pack or pnpm pack writes them\)/);
    writeFileSync(join(empty, "broken.tgz"), "not gzip");
    const broken = await cli([fresh(), "--template", "wallet", "--packages", empty, "--no-install"]);
    expect(broken.stderr).toMatch(/broken\.tgz is not an npm package tarball: not gzip/);
    const others = mkdtempSync(join(work, "others-"));
    tarball(others, { name: "left-pad", version: "1.0.0" }, "left-pad-1.0.0.tgz");
    const foreign = await cli([fresh(), "--template", "wallet", "--packages", others, "--no-install"]);
    expect(foreign.stderr).toMatch(/no @shardkit package among its \.tgz files/);
  });

  it("runs npm install in the new project unless --no-install; a failed install is exit code 1, the project kept", async () => {
    const bin = mkdtempSync(join(work, "bin-"));
    const log = join(bin, "calls.log");
    writeFileSync(join(bin, "npm"), `#!/bin/sh\necho "$PWD $*" >> ${log}\nexit \${FAKE_NPM_EXIT:-0}\n`);
    chmodSync(join(bin, "npm"), 0o755);
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const dir = fresh();
      const ok = await cli([dir, "--template", "allocations"]);
      expect(ok.code).toBe(ExitCode.OK);
      expect(ok.stdout).toContain(", installed.");
      expect(ok.stdout).not.toMatch(/^ {2}npm install/m);
      expect(readFileSync(log, "utf8")).toBe(`${dir} install\n`);

      process.env.FAKE_NPM_EXIT = "1";
      const failedDir = fresh();
      const failed = await cli([failedDir, "--template", "allocations"]);
      expect(failed.code).toBe(ExitCode.FAILED);
      expect(failed.stderr).toBe(
        `create-shardkit: npm install in ${failedDir} failed (exit code 1); the project is written: run npm install in it again\n`,
      );
      expect(existsSync(join(failedDir, "package.json"))).toBe(true);
    } finally {
      process.env.PATH = path;
      delete process.env.FAKE_NPM_EXIT;
    }
  });
});
