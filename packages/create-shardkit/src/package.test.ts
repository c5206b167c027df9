import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describePublishedPackage(pkgDir, {
  title:
    "passes publint and are-the-types-wrong, imports from ESM and CommonJS, and its bin writes a template",
  timeoutMs: 180_000,
  scripts: {
    // The installed bin, with the templates the tarball ships.
    bin: `import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
const out = execFileSync("node_modules/.bin/create-shardkit", ["new-orders", "--template", "orders", "--no-install"], { encoding: "utf8" });
const pkg = JSON.parse(readFileSync("new-orders/package.json", "utf8"));
console.log(out.split("\\n")[0]);
console.log(pkg.name, readdirSync("new-orders").sort().join(" "));`,
  },
  check: (report) => {
    expect(report.scripts.bin?.split("\n")).toEqual([
      expect.stringMatching(/^Created new-orders from the orders template in .+\/new-orders\.$/),
      "new-orders .gitignore README.md package.json prisma scripts src tsconfig.json vitest.config.ts",
    ]);
  },
});
