#!/usr/bin/env node
// `prisma generate` that works offline too. Generation never runs Prisma's native schema engine,
// but the CLI first tries to download it, which fails without internet: a stub engine that exits 1
// (PRISMA_SCHEMA_ENGINE_BINARY) satisfies that check. Set PRISMA_SCHEMA_ENGINE_BINARY yourself to
// use a real engine instead. The schema reaches the databases through @shardkit/prisma
// (`openShards` / `rolloutSchema`, on Prisma's WebAssembly schema engine), not `prisma migrate`.
//
// Usage: node scripts/prisma-generate.mjs <schema file or folder> [--if-installed]
// --if-installed: when the prisma CLI is not installed (npm install --omit=dev), say so and exit 0.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const args = process.argv.slice(2);
const schema = args.find((a) => !a.startsWith("--"));
if (!schema) {
  console.error("usage: node scripts/prisma-generate.mjs <schema file or folder> [--if-installed]");
  process.exit(2);
}

let cli;
try {
  const manifest = createRequire(import.meta.url).resolve("prisma/package.json");
  const { bin } = JSON.parse(readFileSync(manifest, "utf8"));
  cli = join(dirname(manifest), typeof bin === "string" ? bin : bin.prisma);
} catch {
  if (args.includes("--if-installed")) {
    console.log("prisma is not installed: the Prisma client was not generated (npm run generate does it)");
    process.exit(0);
  }
  console.error("prisma is not installed: npm install first");
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
  execFileSync(process.execPath, [cli, "generate", "--schema", schema], { stdio: "inherit", env });
} catch {
  process.exitCode = 1;
} finally {
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
}
