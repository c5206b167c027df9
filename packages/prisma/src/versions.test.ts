import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { prismaVersions, prismaVersionWarning } from "./versions.js";

const work = mkdtempSync(join(tmpdir(), "shardkit-versions-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** An app folder whose node_modules holds these packages at these versions (their package.json only). */
function app(name: string, packages: Record<string, string>): string {
  const dir = join(work, name);
  for (const [pkg, version] of Object.entries(packages)) {
    mkdirSync(join(dir, "node_modules", pkg), { recursive: true });
    writeFileSync(join(dir, "node_modules", pkg, "package.json"), JSON.stringify({ name: pkg, version }));
  }
  mkdirSync(join(dir, "src"), { recursive: true });
  return dir;
}

describe("the app's Prisma packages on one version", () => {
  it("reads each installed version as Node resolves it from the app: the nearest node_modules first", () => {
    const dir = app("nearest", { "@prisma/client": "7.99.1" });
    expect(prismaVersions(join(dir, "src"))).toMatchObject({ "@prisma/client": "7.99.1" });
  });

  it("says nothing when they agree; names each version and the install line when they do not", () => {
    expect(
      prismaVersionWarning(
        app("same", { prisma: "7.10.0", "@prisma/client": "7.10.0", "@prisma/adapter-pg": "7.10.0" }),
      ),
    ).toBeUndefined();
    expect(
      prismaVersionWarning(
        app("mixed", { prisma: "7.10.1", "@prisma/client": "7.10.0", "@prisma/adapter-pg": "7.10.1" }),
      ),
    ).toBe(
      "shardkit: the Prisma packages are not on one version (prisma 7.10.1, @prisma/client 7.10.0, @prisma/adapter-pg 7.10.1): install them with one version, e.g. npm install @prisma/client@7.10.1 @prisma/adapter-pg@7.10.1 && npm install -D prisma@7.10.1",
    );
  });

  it("this repository's own are on one version", () => {
    expect(prismaVersionWarning()).toBeUndefined();
  });
});
