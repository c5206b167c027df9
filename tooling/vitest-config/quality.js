import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = (name) => join(repoRoot, "node_modules/.bin", name);
const run = (cmd, args, cwd) =>
  execFileSync(cmd, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, FORCE_COLOR: "0" },
  });

/**
 * Packs workspace packages as they would be published (`pnpm pack` rewrites `workspace:` and `catalog:`),
 * installs the tarballs into a throwaway npm project outside the workspace and reports what each
 * module system sees. Also runs publint --strict and are-the-types-wrong on the tarball of `pkgDir`.
 * @param {string} pkgDir the package under test
 * @param {{ alsoPack?: string[] }} [options] other workspace package dirs it depends on
 */
export function checkPublishedPackage(pkgDir, options = {}) {
  const work = mkdtempSync(join(tmpdir(), "shardkit-pack-"));
  try {
    const tarballs = [pkgDir, ...(options.alsoPack ?? [])].map((dir) => {
      const dest = mkdtempSync(join(work, "tgz-"));
      run("pnpm", ["pack", "--pack-destination", dest], dir);
      const file = readdirSync(dest).find((f) => f.endsWith(".tgz"));
      if (!file) throw new Error(`pnpm pack produced no tarball for ${dir}`);
      return join(dest, file);
    });
    const own = tarballs[0];
    const publint = run(bin("publint"), ["--strict", own], pkgDir);
    let attw;
    try {
      attw = {
        ok: true,
        output: run(bin("attw"), [own, "--profile", "node16", "--format", "ascii"], pkgDir),
      };
    } catch (err) {
      attw = { ok: false, output: `${err.stdout ?? ""}${err.stderr ?? ""}` };
    }
    const app = join(work, "app");
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "pack-check", private: true, version: "0.0.0" }),
    );
    run(
      "npm",
      ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...tarballs],
      app,
    );
    const name = JSON.parse(run("tar", ["-xzOf", own, "package/package.json"], work)).name;
    const esm = JSON.parse(
      run(
        "node",
        [
          "--input-type=module",
          "-e",
          `const m = await import(${JSON.stringify(name)}); console.log(JSON.stringify(Object.keys(m).filter(k => k !== "default").sort()))`,
        ],
        app,
      ),
    );
    const cjs = JSON.parse(
      run(
        "node",
        [
          "-e",
          `const m = require(${JSON.stringify(name)}); console.log(JSON.stringify(Object.keys(m).sort()))`,
        ],
        app,
      ),
    );
    // Extra ES module scripts run in the fresh project (e.g. subpath entries sharing classes): their output.
    const scripts = Object.fromEntries(
      Object.entries(options.scripts ?? {}).map(([key, code]) => [
        key,
        run("node", ["--input-type=module", "-e", code], app).trim(),
      ]),
    );
    return { name, publint, attw, esm, cjs, scripts, appDir: app };
  } finally {
    if (!process.env.SHARDKIT_KEEP_PACK) rmSync(work, { recursive: true, force: true });
  }
}
