#!/usr/bin/env node
// `prisma generate` offline: generation never runs the native schema engine, but the CLI tries to
// download it first; a stub binary that exits 1 satisfies that check (docs/development.md).
// Usage (from a package): shardkit-prisma-generate <schema.prisma>
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const schema = process.argv[2];
if (!schema) {
  console.error("usage: shardkit-prisma-generate <schema.prisma>");
  process.exit(2);
}
const stub = join(mkdtempSync(join(tmpdir(), "prisma-stub-")), "schema-engine");
writeFileSync(stub, "#!/bin/sh\nexit 1\n");
chmodSync(stub, 0o755);
execFileSync("prisma", ["generate", "--schema", schema], {
  stdio: ["ignore", "inherit", "inherit"],
  env: {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: stub,
    CHECKPOINT_DISABLE: "1",
    PRISMA_HIDE_UPDATE_MESSAGE: "1",
  },
});
