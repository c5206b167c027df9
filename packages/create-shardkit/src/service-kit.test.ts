import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { localServiceKit, SERVICE_KIT, serviceKitFiles } from "../build/service-kit.js";
import { buildTemplate, repoRoot, TemplateBuildError, templateNames } from "../build/templates.js";

const apps = templateNames();
const built = new Map(await Promise.all(apps.map(async (app) => [app, await buildTemplate(app)] as const)));
const kitDir = join(repoRoot, "tooling", "service-kit");
const work = mkdtempSync(join(tmpdir(), "create-shardkit-kit-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const problem = (message: string) => new TemplateBuildError(message);

describe("the runtime the apps share (tooling/service-kit) in the templates", () => {
  it.each(apps)("%s: src/service-kit/ holds the kit's files it uses, as they are", (app) => {
    const files = built.get(app)!;
    const kit = [...files.keys()].filter((path) => path.startsWith(`${SERVICE_KIT.dir}/`));
    expect(kit).toContain(`${SERVICE_KIT.dir}/auth.ts`);
    for (const path of kit)
      expect(files.get(path), path).toBe(
        readFileSync(join(kitDir, "src", path.slice(SERVICE_KIT.dir.length + 1)), "utf8"),
      );
    // The app's imports of the kit are relative, to files the template has.
    for (const [path, text] of files) {
      if (!path.endsWith(".ts") || path.startsWith(`${SERVICE_KIT.dir}/`)) continue;
      for (const m of text.matchAll(/from "((?:\.\/|\.\.\/)+service-kit\/([\w-]+))\.js"/g))
        expect(kit, `${path}: ${m[1]}`).toContain(`${SERVICE_KIT.dir}/${m[2]}.ts`);
    }
  });

  it("only the entries an app imports, with the kit's files they import", () => {
    // allocations places no customers: no customers.ts (nor @shardkit/selector, which it does not declare).
    expect(built.get("allocations")!.has(`${SERVICE_KIT.dir}/customers.ts`)).toBe(false);
    const files = serviceKitFiles(kitDir, "demo", ["token"], problem);
    expect([...files.keys()].sort()).toEqual([`${SERVICE_KIT.dir}/auth.ts`, `${SERVICE_KIT.dir}/token.ts`]);
  });

  it("imports become relative to the importing file", () => {
    const text =
      'import { serve } from "@shardkit/service-kit/serve";\nconst m = await import("@shardkit/service-kit/auth");\n';
    expect(localServiceKit("src/server.ts", text)).toBe(
      'import { serve } from "./service-kit/serve.js";\nconst m = await import("./service-kit/auth.js");\n',
    );
    expect(localServiceKit("src/test/world.ts", text)).toContain('from "../service-kit/serve.js"');
  });

  it("the build refuses an entry the kit does not export, or one outside its src/", () => {
    expect(() => serviceKitFiles(kitDir, "demo", ["login"], problem)).toThrow(
      new TemplateBuildError(
        "apps/demo imports @shardkit/service-kit/login, which tooling/service-kit does not export",
      ),
    );
    const dir = join(work, "kit");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), '{ "exports": { "./x": "./lib/x.js" } }');
    expect(() => serviceKitFiles(dir, "demo", ["x"], problem)).toThrow(
      new TemplateBuildError(
        "@shardkit/service-kit: the entry ./x is ./lib/x.js; the templates copy files of its src/ only",
      ),
    );
  });
});
