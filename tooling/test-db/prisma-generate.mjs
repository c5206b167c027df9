#!/usr/bin/env node
// `prisma generate` that works offline too. Generation never runs Prisma's native schema engine,
// but the CLI first tries to download it, which fails without internet: a stub engine that exits 1
// (PRISMA_SCHEMA_ENGINE_BINARY) satisfies that check. Set PRISMA_SCHEMA_ENGINE_BINARY yourself to
// use a real engine instead. The schema reaches the databases through @shardkit/prisma
// (`openShards` / `rolloutSchema`, on Prisma's WebAssembly schema engine), not `prisma migrate`.
//
// Usage, from the package's folder (where its scripts run): node prisma-generate.mjs <schema file or
// folder> [--if-installed]. The schema is relative to that folder, and the Prisma CLI is the one that
// package installs (found from there, else from this file's folder), run with this Node.
// --if-installed: when the Prisma CLI is not installed (an install without devDependencies), say so
// and exit 0.
//
// This one file is also every create-shardkit template's scripts/prisma-generate.mjs (copied
// unchanged when the templates are built): it must work the same inside and outside a workspace.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const self = fileURLToPath(import.meta.url);
const usage = `usage: node ${relative(process.cwd(), self)} <schema file or folder> [--if-installed]`;
const args = process.argv.slice(2);
const flags = args.filter((a) => a.startsWith("--"));
const positional = args.filter((a) => !a.startsWith("--"));
const unknown = flags.filter((f) => f !== "--if-installed");
if (positional.length !== 1 || unknown.length > 0) {
  if (unknown.length > 0) console.error(`unknown option ${unknown.join(", ")}`);
  console.error(usage);
  process.exit(2);
}
const [schema] = positional;

/** The Prisma CLI's entry file, as installed for the package in `cwd` (else next to this file). */
function findPrismaCli() {
  for (const from of [join(process.cwd(), "package.json"), self]) {
    try {
      const manifest = createRequire(from).resolve("prisma/package.json");
      const { bin } = JSON.parse(readFileSync(manifest, "utf8"));
      return join(dirname(manifest), typeof bin === "string" ? bin : bin.prisma);
    } catch {
      // Not installed there: try the next place.
    }
  }
  return undefined;
}

const cli = findPrismaCli();
if (!cli) {
  if (flags.includes("--if-installed")) {
    console.log("prisma is not installed: the Prisma client was not generated (the generate script does it)");
    process.exit(0);
  }
  console.error("prisma is not installed: install the dependencies first (prisma is a devDependency)");
  process.exit(1);
}

const env = { ...process.env, CHECKPOINT_DISABLE: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1" };
let stubDir;
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) {
  stubDir = mkdtempSync(join(tmpdir(), "prisma-stub-"));
  const windows = process.platform === "win32";
  const stub = join(stubDir, windows ? "schema-engine.cmd" : "schema-engine");
  writeFileSync(stub, windows ? "@exit /b 1\r\n" : "#!/bin/sh\nexit 1\n");
  chmodSync(stub, 0o755);
  env.PRISMA_SCHEMA_ENGINE_BINARY = stub;
}
try {
  // No stdin: generating asks nothing, and a prompt must never wait in CI. Prisma prints its own
  // errors; this exits with its status.
  const run = spawnSync(process.execPath, [cli, "generate", "--schema", schema], {
    stdio: ["ignore", "inherit", "inherit"],
    env,
  });
  if (run.error) console.error(`cannot run prisma generate: ${run.error.message}`);
  process.exitCode = run.status ?? 1;
} finally {
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
}
