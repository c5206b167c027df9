import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { catalogVersion } from "@shardkit/vitest-config/quality";
import { afterAll, describe, expect, it } from "vitest";
// What every template ships as src/test/test-db.js and .d.ts (copied unchanged: checked below).
import {
  ClustersUnavailableError,
  dropCluster,
  ensureCluster,
  patient,
  whyNoClusters,
} from "../../../tooling/test-db/index.js";
import {
  allowedScripts,
  buildTemplate,
  exportedNames,
  PRISMA_GENERATE,
  prismaGenerateFile,
  repoRoot,
  rewriteReadme,
  staleTemplates,
  TEST_DB_FILES,
  TemplateBuildError,
  templateManifest,
  templateNames,
  testDbFiles,
  workspacePackages,
  writeTemplates,
} from "../build/templates.js";
import { defaultTemplatesDir } from "./templates.js";

const apps = templateNames();
const built = new Map(await Promise.all(apps.map(async (app) => [app, await buildTemplate(app)] as const)));
const json = (app: string, file: string) => JSON.parse(built.get(app)!.get(file)!);
const work = mkdtempSync(join(tmpdir(), "create-shardkit-templates-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the templates, made from apps/*", () => {
  it("one per reference service", () => {
    expect(apps).toEqual(["allocations", "orders", "wallet"]);
  });

  it.each(apps)(
    "%s: package.json has real versions, no private tooling package, a generate that works offline",
    (app) => {
      const source = JSON.parse(readFileSync(join(repoRoot, "apps", app, "package.json"), "utf8"));
      const pkg = json(app, "package.json");
      const workspace = workspacePackages();
      const all = { ...pkg.dependencies, ...pkg.devDependencies };
      for (const [dep, spec] of Object.entries({ ...source.dependencies, ...source.devDependencies })) {
        if (spec === "catalog:") expect(all[dep], dep).toBe(catalogVersion(dep));
        else if (String(spec).startsWith("workspace:")) {
          const target = workspace.get(dep)!;
          expect(all[dep], dep).toBe(target.private ? undefined : `^${target.version}`);
        }
      }
      expect(
        Object.keys(all)
          .filter((d) => d.startsWith("@shardkit/"))
          .sort(),
      ).toEqual(
        // The published ones: a private one (@shardkit/service-kit) becomes files of the template.
        Object.keys(source.dependencies)
          .filter((d) => d.startsWith("@shardkit/") && !workspace.get(d)?.private)
          .sort(),
      );
      for (const tool of ["vitest", "vite", "typescript", "@types/node", "pg", "@types/pg"])
        expect(pkg.devDependencies[tool], tool).toBe(catalogVersion(tool));
      expect(pkg.scripts.generate).toBe("node scripts/prisma-generate.mjs prisma/schema");
      expect(pkg.scripts.postinstall).toBe("node scripts/prisma-generate.mjs prisma/schema --if-installed");
      expect(pkg.allowScripts).toEqual(allowedScripts());
      expect(pkg.allowScripts).toMatchObject({ esbuild: true, prisma: false });
      // The very file of tooling/test-db's bin, byte for byte: what the repository generates with.
      expect(built.get(app)!.get(PRISMA_GENERATE.target)).toBe(
        readFileSync(join(repoRoot, "tooling", "test-db", "prisma-generate.mjs"), "utf8"),
      );
    },
  );

  it.each(apps)("%s: a tsconfig.json and a vitest.config.ts of its own", (app) => {
    const tsconfig = json(app, "tsconfig.json");
    const base = JSON.parse(readFileSync(join(repoRoot, "tooling/tsconfig/base.json"), "utf8"));
    expect(tsconfig).toEqual({ compilerOptions: base.compilerOptions, include: ["src"] });
    const vitest = built.get(app)!.get("vitest.config.ts")!;
    expect(vitest).toMatch(/^import \{ defineConfig \} from "vitest\/config";\n/);
    expect(vitest).toContain("testTimeout: 120_000,");
    expect(vitest).not.toMatch(/@shardkit|alias|name:/);
    if (app !== "allocations") {
      expect(vitest).toContain('globalSetup: ["src/test/global-setup.ts"],');
      expect(vitest).toContain("fileParallelism: false,");
    }
  });

  it.each(apps)(
    "%s: the tests use src/test/test-db.js (tooling/test-db as it is), the schema test node_modules/@shardkit/prisma",
    (app) => {
      const files = built.get(app)!;
      // The very files of tooling/test-db, byte for byte: a change there is a change of every template.
      for (const [target, source] of Object.entries(TEST_DB_FILES))
        expect(files.get(target), target).toBe(
          readFileSync(join(repoRoot, "tooling", "test-db", source), "utf8"),
        );
      expect(files.has("src/test/test-db.ts")).toBe(false);
      // Likewise tooling/test-db's hostile-input entry, which every app's hostile test imports.
      for (const ext of ["js", "d.ts"])
        expect(files.get(`src/test/hostile.${ext}`), `hostile.${ext}`).toBe(
          readFileSync(join(repoRoot, "tooling", "test-db", `hostile.${ext}`), "utf8"),
        );
      expect(files.get("src/hostile.test.ts")).toContain('from "./test/hostile.js"');
      const importers = [...files].filter(
        ([path, text]) => path.endsWith(".ts") && !path.endsWith(".d.ts") && text.includes("/test-db.js"),
      );
      expect(importers.length).toBeGreaterThan(0);
      // Every name a test imports from it is exported by the code and declared by the types.
      const code = exportedNames(files.get("src/test/test-db.js")!);
      const types = exportedNames(files.get("src/test/test-db.d.ts")!);
      expect([...types].sort()).toEqual([...code].sort());
      for (const [path, text] of importers) {
        expect(text, path).toMatch(
          path.startsWith("src/test/") ? /from "\.\/test-db\.js"/ : /from "\.\/test\/test-db\.js"/,
        );
        for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"\.\.?\/(?:test\/)?test-db\.js"/g))
          for (const name of m[1]!
            .split(",")
            .map((n) => n.trim())
            .filter(Boolean))
            expect(code.has(name), `${path} imports ${name}`).toBe(true);
      }
      // The schema test compares the project's copy of shardkit.prisma with the installed package's
      // (test-db's copiedSchema reads prisma/schema/<file> and node_modules/@shardkit/prisma/schema/<file>).
      const schemaTest = files.get("src/schema.test.ts");
      if (schemaTest) {
        expect(schemaTest).toMatch(
          /copiedSchema\(new URL\("\.\.", import\.meta\.url\), (file|"shardkit\.prisma")\)/,
        );
        expect(schemaTest).toContain('"shardkit.prisma"');
        expect(files.get("src/test/test-db.js")).toContain(
          // biome-ignore lint/suspicious/noTemplateCurlyInString: the copied source's text, as written there
          "read(`node_modules/@shardkit/prisma/schema/${file}`)",
        );
      }
      expect(files.get("gitignore")).toMatch(/^node_modules\/\n[\s\S]*^src\/generated\/\n[\s\S]*^\.data\/$/m);
    },
  );

  it.each(apps)(
    "%s: a README for the new service: install, test, demo, start; the tests' PostgreSQL",
    (app) => {
      const readme = built.get(app)!.get("README.md")!;
      expect(readme).toMatch(/^# \{\{name\}\}\n/);
      for (const command of ["npm install", "npm test", "npm run demo", "npm start"])
        expect(readme).toContain(command);
      expect(readme).toContain("PRISMA_SCHEMA_ENGINE_BINARY");
      expect(readme).toContain("127.0.0.1:5432");
      expect(readme).toMatch(/SHARDKIT_TEST_CLUSTER=<name>:<port>/);
      expect(readme).toMatch(/SHARDKIT_TEST_NO_CLUSTERS=1/);
    },
  );

  it("templates/ holds what the build makes now (the package's build writes it, its prepack checks it)", async () => {
    for (const app of apps) {
      const dir = join(defaultTemplatesDir(), app);
      const shipped = existsSync(dir) ? listFiles(dir) : [];
      expect(shipped, `templates/${app} is stale: pnpm --filter create-shardkit build`).toEqual(
        [...built.get(app)!.keys()].sort(),
      );
      for (const [path, text] of built.get(app)!)
        expect(readFileSync(join(dir, path), "utf8"), `templates/${app}/${path}`).toBe(text);
    }
    expect(await staleTemplates()).toEqual([]);
  });

  it("the prepack's check (build/main.ts --check) names each file changed, missing or extra, and writes nothing", async () => {
    const dir = join(work, "checked");
    await writeTemplates(dir);
    expect(await staleTemplates(dir)).toEqual([]);
    writeFileSync(join(dir, "wallet", "README.md"), "changed by hand\n");
    rmSync(join(dir, "orders", "package.json"));
    writeFileSync(join(dir, "allocations", "notes.txt"), "not the build's\n");
    mkdirSync(join(dir, "ledger"));
    expect((await staleTemplates(dir)).sort()).toEqual([
      "templates/allocations/notes.txt: not made by the build",
      "templates/ledger: no app of that name",
      "templates/orders/package.json: missing",
      "templates/wallet/README.md: differs",
    ]);
    expect(readFileSync(join(dir, "wallet", "README.md"), "utf8")).toBe("changed by hand\n");
    expect(existsSync(join(dir, "orders", "package.json"))).toBe(false);
  });
});

describe("the build refuses what would not stand alone", () => {
  const workspace = workspacePackages();
  const catalog = (name: string) => `1.0.0-${name}`;

  it("a private package without a replacement, a script running a private package's bin", () => {
    workspace.set("@shardkit/secret", {
      name: "@shardkit/secret",
      dir: work,
      version: "0.0.0",
      private: true,
    });
    expect(() =>
      templateManifest(
        { name: "@shardkit/x", devDependencies: { "@shardkit/secret": "workspace:*" } },
        { workspace, catalog },
      ),
    ).toThrow(
      new TemplateBuildError(
        "@shardkit/x uses the private package @shardkit/secret, which templates have no replacement for (build/templates.ts)",
      ),
    );
    expect(() =>
      templateManifest(
        { name: "@shardkit/x", scripts: { gen: "shardkit-prisma-generate a" }, devDependencies: {} },
        { workspace, catalog },
      ),
    ).toThrow(/script gen runs shardkit-prisma-generate of a private package/);
    expect(() =>
      templateManifest(
        { name: "@shardkit/x", dependencies: { zod: "catalog:named" } },
        { workspace, catalog },
      ),
    ).toThrow(/named catalogs/);
  });

  it("workspace:* and workspace:^ become ^version, workspace:~ ~version, catalog: the catalog's", () => {
    const { manifest } = templateManifest(
      {
        name: "@shardkit/x",
        dependencies: { "@shardkit/id": "workspace:*", "@shardkit/prisma": "workspace:^", zod: "catalog:" },
        devDependencies: { "@shardkit/selector": "workspace:~" },
      },
      { workspace, catalog, allowScripts: {} },
    );
    const v = (name: string) => workspace.get(name)!.version;
    expect(manifest.dependencies).toEqual({
      "@shardkit/id": `^${v("@shardkit/id")}`,
      "@shardkit/prisma": `^${v("@shardkit/prisma")}`,
      zod: "1.0.0-zod",
    });
    expect(manifest.devDependencies?.["@shardkit/selector"]).toBe(`~${v("@shardkit/selector")}`);
    expect(manifest.name).toBe("x");
  });

  it("test-db helpers whose code and types export different names, or that lack what an app imports", () => {
    const dir = join(work, "test-db");
    mkdirSync(dir, { recursive: true });
    const fake = new Map([
      ["@shardkit/test-db", { name: "@shardkit/test-db", dir, version: "0.0.0", private: true }],
    ]);
    writeFileSync(
      join(dir, "index.js"),
      "export const MAIN_PORT = 5432;\nexport async function extra() {}\n",
    );
    writeFileSync(
      join(dir, "index.d.ts"),
      "export declare const MAIN_PORT: number;\nexport declare function gone(): void;\n",
    );
    expect(() => testDbFiles(fake, "demo", [])).toThrow(
      new TemplateBuildError(
        "tooling/test-db: index.js and index.d.ts do not export the same names (extra has no declaration, gone is declared but not exported)",
      ),
    );
    writeFileSync(
      join(dir, "index.d.ts"),
      "export declare const MAIN_PORT: number;\nexport declare function extra(): Promise<void>;\n",
    );
    expect(() => testDbFiles(fake, "demo", ["MAIN_PORT", "createDatabase"])).toThrow(
      new TemplateBuildError(
        "apps/demo imports createDatabase from @shardkit/test-db, which tooling/test-db does not export",
      ),
    );
    expect([...testDbFiles(fake, "demo", ["MAIN_PORT"]).keys()]).toEqual(Object.keys(TEST_DB_FILES));
    // An entry (`@shardkit/test-db/<entry>`) comes from package.json's exports, with its types.
    writeFileSync(
      join(dir, "package.json"),
      '{ "exports": { "./table": { "types": "./t.d.ts", "default": "./t.js" } } }',
    );
    writeFileSync(join(dir, "t.js"), "export const table = [];\n");
    writeFileSync(join(dir, "t.d.ts"), "export declare const table: never[];\n");
    expect(() => testDbFiles(fake, "demo", [], ["chairs"])).toThrow(
      new TemplateBuildError(
        "apps/demo imports @shardkit/test-db/chairs, which tooling/test-db does not export (with its types)",
      ),
    );
    const withEntry = testDbFiles(fake, "demo", [], ["table"]);
    expect(withEntry.get("src/test/table.js")).toBe("export const table = [];\n");
    expect(withEntry.get("src/test/table.d.ts")).toBe("export declare const table: never[];\n");
  });

  it("an app whose files still name the repository or import an undeclared package", async () => {
    const repo = join(work, "repo");
    const app = join(repo, "apps", "demo");
    mkdirSync(join(app, "src"), { recursive: true });
    writeFileSync(join(repo, "pnpm-workspace.yaml"), "packages:\n  - apps/*\n");
    writeFileSync(
      join(repo, "package.json"),
      JSON.stringify({
        name: "r",
        devDependencies: { typescript: "5.9.3", vitest: "4.1.12", vite: "8.3.8", "@types/node": "20.19.43" },
      }),
    );
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "@shardkit/demo", dependencies: {} }));
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({ include: ["src"] }));
    writeFileSync(join(app, "vitest.config.ts"), "export default { test: { testTimeout: 5 } };\n");
    writeFileSync(join(app, "README.md"), "# apps/demo: the reference demo service\n\nRun `pnpm dev`.\n");
    writeFileSync(join(app, "src", "a.ts"), 'import chalk from "chalk";\nexport const x = chalk;\n');
    await expect(buildTemplate("demo", repo)).rejects.toThrow(
      /the demo template \(from apps\/demo\):\n {2}src\/a.ts: imports chalk, which package.json does not declare\n {2}README.md:\d+: pnpm \(the template is an npm project\): Run `pnpm dev`.$/,
    );
  });

  it("the README's repository commands become the project's", () => {
    expect(
      rewriteReadme(
        "# apps/wallet: the reference wallet service\n\nFrom the repository root, `pnpm demo` (or `pnpm --filter @shardkit/wallet demo`): go. `pnpm --filter @shardkit/wallet start` serves; `pnpm test` at the root runs them; under `apps/wallet/.data/demo`, /work/main/apps/wallet/.data; like [`apps/orders`](../orders). `pnpm --silent token --admin ops`.\n",
        "wallet",
      ),
    ).toBe(
      "`npm run demo`: go. `npm start` serves; `npm test` runs them; under `.data/demo`, /path/to/{{name}}/.data; like the `orders` template. `npm run --silent token -- --admin ops`.\n",
    );
  });
});

describe("the templates' scripts/prisma-generate.mjs (tooling/test-db's bin)", () => {
  // In a project where the Prisma CLI is not installed (nothing above a temporary folder has it, and
  // without the NODE_PATH pnpm sets, through which require.resolve would find the workspace's).
  const project = join(work, "no-prisma");
  mkdirSync(join(project, "scripts"), { recursive: true });
  writeFileSync(join(project, "package.json"), '{ "name": "no-prisma", "private": true }\n');
  writeFileSync(join(project, PRISMA_GENERATE.target), built.get("wallet")!.get(PRISMA_GENERATE.target)!);
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [PRISMA_GENERATE.target, ...args], {
      cwd: project,
      encoding: "utf8",
      env: { ...process.env, NODE_PATH: "" },
    });

  it("--if-installed without the Prisma CLI says so and succeeds (postinstall of an install without devDependencies)", () => {
    const skipped = run("prisma/schema", "--if-installed");
    expect(skipped.status).toBe(0);
    expect(skipped.stdout).toMatch(/^prisma is not installed: the Prisma client was not generated/);
    const failed = run("prisma/schema");
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(/^prisma is not installed: install the dependencies first/);
  });

  it("a usage error names the script as the project runs it", () => {
    for (const args of [[], ["a", "b"], ["prisma/schema", "--if-instaled"]]) {
      const usage = run(...args);
      expect(usage.status, args.join(" ")).toBe(2);
      expect(usage.stderr).toContain(
        "usage: node scripts/prisma-generate.mjs <schema file or folder> [--if-installed]",
      );
    }
  });

  it("the build refuses a tooling/test-db without the bin", () => {
    const dir = join(work, "test-db-no-bin");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), '{ "name": "@shardkit/test-db", "private": true }\n');
    const fake = new Map([
      ["@shardkit/test-db", { name: "@shardkit/test-db", dir, version: "0.0.0", private: true }],
    ]);
    expect(() => prismaGenerateFile(fake)).toThrow(
      new TemplateBuildError("tooling/test-db: package.json has no bin shardkit-prisma-generate"),
    );
  });
});

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const pgVersion = () => readdirSync("/etc/postgresql").sort().at(-1)!;
const clusterState = (name: string) =>
  spawnSync("pg_lsclusters", ["--no-header"], { encoding: "utf8" })
    .stdout.split("\n")
    .map((line) => line.trim().split(/\s+/))
    .find(([v, cluster]) => v === pgVersion() && cluster === name)?.[3] ?? "absent";

describe("the templates' src/test/test-db.js (tooling/test-db)", () => {
  it.skipIf(whyNoClusters() !== undefined)(
    "never reconfigures, stops or drops a server of the same name it did not make; drops one it made, its configuration folder included",
    async () => {
      const v = pgVersion();
      const foreign = `cs_foreign_${process.pid}`;
      const port = await freePort();
      const sh = (cmd: string, args: string[]) => {
        const run = spawnSync(cmd, args, { encoding: "utf8" });
        expect(run.status, run.stderr).toBe(0);
      };
      sh("pg_createcluster", [
        v,
        foreign,
        "--port",
        String(port),
        "--start-conf=manual",
        "--",
        "--auth-local=trust",
      ]);
      try {
        sh("pg_ctlcluster", ["--skip-systemctl-redirect", v, foreign, "start"]);
        const refused = `PostgreSQL cluster ${foreign} exists and was not made by these tests (it has no conf.d/shardkit.conf): they never change, stop or drop a server they did not make; give the tests a cluster name and port of their own`;
        await expect(ensureCluster(foreign, port)).rejects.toThrow(`${refused} (not ${foreign}:${port})`);
        await expect(dropCluster(foreign)).rejects.toThrow(refused);
        expect(clusterState(foreign)).toBe("online");
        expect(existsSync(`/etc/postgresql/${v}/${foreign}/conf.d/shardkit.conf`)).toBe(false);
      } finally {
        spawnSync("pg_dropcluster", [v, foreign, "--stop"]);
      }
      const own = `cs_own_${process.pid}`;
      await ensureCluster(own, await freePort());
      expect(clusterState(own)).toBe("online");
      await dropCluster(own);
      expect(clusterState(own)).toBe("absent");
      expect(existsSync(`/etc/postgresql/${v}/${own}`)).toBe(false);
    },
    patient(120_000),
  );

  it("says why it cannot make PostgreSQL servers, or nothing when it can", async () => {
    expect(whyNoClusters({ PATH: join(work, "nothing") })).toBe(
      "pg_createcluster is not installed (the postgresql-common package of Debian and Ubuntu provides it)",
    );
    expect(whyNoClusters({ ...process.env, SHARDKIT_TEST_NO_CLUSTERS: "1" })).toBe(
      "SHARDKIT_TEST_NO_CLUSTERS is set",
    );
    if (process.getuid?.() === 0 && existsSync("/usr/bin/pg_createcluster"))
      expect(whyNoClusters()).toBeUndefined();
    process.env.SHARDKIT_TEST_NO_CLUSTERS = "1";
    try {
      const err = await ensureCluster("cs_never", 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ClustersUnavailableError);
      expect(err).toMatchObject({
        code: "CLUSTERS_UNAVAILABLE",
        message:
          "cannot make PostgreSQL server cs_never (port 1) for the tests: SHARDKIT_TEST_NO_CLUSTERS is set",
      });
    } finally {
      delete process.env.SHARDKIT_TEST_NO_CLUSTERS;
    }
  });
});

function listFiles(dir: string, base = ""): string[] {
  return readdirSync(join(dir, base), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? listFiles(dir, `${base}${e.name}/`) : [`${base}${e.name}`]))
    .sort();
}
