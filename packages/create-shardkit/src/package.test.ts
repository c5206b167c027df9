import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const idDir = fileURLToPath(new URL("../../id", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, imports from ESM and CommonJS, and its bin writes a template", () => {
    const report = checkPublishedPackage(pkgDir, {
      alsoPack: [idDir],
      scripts: {
        // The installed bin, with the templates the tarball ships.
        bin: `import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
const out = execFileSync("node_modules/.bin/create-shardkit", ["new-orders", "--template", "orders", "--no-install"], { encoding: "utf8" });
const pkg = JSON.parse(readFileSync("new-orders/package.json", "utf8"));
console.log(out.split("\\n")[0]);
console.log(pkg.name, readdirSync("new-orders").sort().join(" "));`,
      },
    });
    expect(report.name).toBe("create-shardkit");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "CreateShardkitError",
      "ExitCode",
      "InstallFailedError",
      "InvalidProjectNameError",
      "PackagesDirError",
      "TargetNotEmptyError",
      "UnknownTemplateError",
      "defaultTemplatesDir",
      "isShardkitError",
      "listTemplates",
      "projectName",
      "readPackagesDir",
      "run",
      "scaffold",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
    expect(report.scripts.bin?.split("\n")).toEqual([
      expect.stringMatching(/^Created new-orders from the orders template in .+\/new-orders\.$/),
      "new-orders .gitignore README.md package.json prisma scripts src tsconfig.json vitest.config.ts",
    ]);
  }, 180_000);
});
