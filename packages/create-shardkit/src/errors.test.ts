import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { afterAll, describe, expect, it } from "vitest";
import * as errors from "./errors.js";
import { projectName, scaffold } from "./scaffold.js";
import { readPackagesDir } from "./tarballs.js";

const work = mkdtempSync(join(tmpdir(), "create-shardkit-errors-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A templates folder with one tiny template, so that scaffolding is cheap. */
function tinyTemplates(): string {
  const dir = join(work, `templates-${Math.random().toString(36).slice(2)}`);
  mkdirSync(join(dir, "tiny"), { recursive: true });
  writeFileSync(
    join(dir, "tiny", "package.json"),
    JSON.stringify({ name: "tiny", description: "a tiny one" }),
  );
  return dir;
}

/** Runs `fn` with an `npm` on the PATH that exits with `code`. */
async function withFakeNpm<T>(code: number, fn: () => Promise<T>): Promise<T> {
  const bin = mkdtempSync(join(work, "bin-"));
  writeFileSync(join(bin, "npm"), `#!/bin/sh\nexit ${code}\n`);
  chmodSync(join(bin, "npm"), 0o755);
  const path = process.env.PATH;
  process.env.PATH = `${bin}:${path}`;
  try {
    return await fn();
  } finally {
    process.env.PATH = path;
  }
}

/** Every code (the Record makes the table exhaustive), its one class, and a public call that raises it. */
const byCode: ErrorTable<errors.CreateErrorCode> = {
  UNKNOWN_TEMPLATE: [
    errors.UnknownTemplateError,
    () => scaffold({ dir: join(work, "a"), template: "nope", templatesDir: tinyTemplates(), install: false }),
  ],
  TARGET_NOT_EMPTY: [
    errors.TargetNotEmptyError,
    () => {
      const dir = mkdtempSync(join(work, "full-"));
      writeFileSync(join(dir, "x"), "");
      return scaffold({ dir, template: "tiny", templatesDir: tinyTemplates(), install: false });
    },
  ],
  INVALID_PROJECT_NAME: [errors.InvalidProjectNameError, () => projectName("___")],
  INVALID_PACKAGES: [errors.PackagesDirError, () => readPackagesDir(join(work, "no-such-folder"))],
  INSTALL_FAILED: [
    errors.InstallFailedError,
    () =>
      withFakeNpm(3, () =>
        scaffold({
          dir: join(work, `fails-${Math.random().toString(36).slice(2)}`),
          template: "tiny",
          templatesDir: tinyTemplates(),
          installOutput: "ignore",
        }),
      ),
  ],
};

describeErrorRules(errors, byCode, import.meta.url);

describe("the errors' messages say what to do", () => {
  it("names the templates, the folder, the reason", async () => {
    await expect(
      scaffold({ dir: join(work, "b"), template: "nope", templatesDir: tinyTemplates(), install: false }),
    ).rejects.toThrow('unknown template "nope": the templates are tiny');
    await expect(
      scaffold({ dir: join(work, "c"), template: "x", templatesDir: join(work, "none"), install: false }),
    ).rejects.toThrow(/has no templates/);
    expect(() => projectName("...")).toThrow(
      '"..." cannot name the project\'s package: no letter or digit in it',
    );
    const failed = await withFakeNpm(3, () =>
      scaffold({
        dir: join(work, "d"),
        template: "tiny",
        templatesDir: tinyTemplates(),
        installOutput: "ignore",
      }).catch((err: unknown) => err),
    );
    expect(errors.isShardkitError(failed, "INSTALL_FAILED") && failed.dir).toBe(join(work, "d"));
    expect((failed as Error).message).toMatch(
      /npm install in .+ failed \(exit code 3\); the project is written/,
    );
  });
});
