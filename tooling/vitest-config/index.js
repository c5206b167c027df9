import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { configDefaults } from "vitest/config";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * `@shardkit/<name>` -> its `src/index.ts`, and each subpath export `@shardkit/<name>/<sub>` ->
 * `src/<sub>.ts`, so tests always run against source (one copy of every module), never a stale build.
 */
function workspaceAliases() {
  const dir = join(repoRoot, "packages");
  const aliases = [];
  for (const name of readdirSync(dir)) {
    const src = join(dir, name, "src");
    if (!existsSync(join(src, "index.ts"))) continue;
    const { exports = {} } = JSON.parse(readFileSync(join(dir, name, "package.json"), "utf8"));
    for (const key of Object.keys(exports)) {
      const sub = key === "." ? "index" : key.slice(2);
      if (!existsSync(join(src, `${sub}.ts`))) continue;
      const specifier = key === "." ? `@shardkit/${name}` : `@shardkit/${name}/${sub}`;
      aliases.push({ find: new RegExp(`^${specifier}$`), replacement: join(src, `${sub}.ts`) });
    }
  }
  return aliases;
}

/** The setup file that scales the default time limits by the machine's load (`patient`) in each test file. */
export const PATIENT_TIMEOUTS = join(dirname(fileURLToPath(import.meta.url)), "patient-timeouts.js");

/** The release checks: each package's packed-and-installed test (publint, are-the-types-wrong, types). */
export const RELEASE_CHECKS = ["src/package.test.ts"];

/**
 * Each app's test files that create-shardkit's end-to-end test runs in the project a user gets from
 * the app's template, on the packed packages: the demo, on embedded PGlite. The repository's test run
 * (`SHARDKIT_TEST_FILES=tests`) leaves them to it rather than run them twice; vitest run in the app
 * runs them.
 */
export const END_TO_END = ["src/demo.test.ts"];

/**
 * Which of a project's test files run (`SHARDKIT_TEST_FILES`, set by the lanes of `pnpm test`):
 * `release` the release checks alone (no type tests, and only the global setups they need, so a
 * release lane never touches the databases and clusters another lane's setup made), `tests`
 * everything else (but an app's `END_TO_END` files), unset everything. `SHARDKIT_TEST_PARTS` (JSON, also the lanes'), for a project
 * whose tests are split across lanes: `{ "<name>": { "only": [files] } }` runs those of its files
 * alone, `{ "<name>": { "skip": [files] } }` all but those (paths relative to the package).
 */
function selection(name, options, app) {
  const which = process.env.SHARDKIT_TEST_FILES;
  const part = JSON.parse(process.env.SHARDKIT_TEST_PARTS || "{}")[name] ?? {};
  const globalSetup = which === "release" ? (options.releaseGlobalSetup ?? []) : (options.globalSetup ?? []);
  const include =
    which === "release" ? RELEASE_CHECKS : (part.only ?? ["src/**/*.test.ts", "test/**/*.test.ts"]);
  const exclude = [
    ...(which === "tests" ? [...RELEASE_CHECKS, ...(app ? END_TO_END : [])] : []),
    ...(part.skip ?? []),
  ];
  return {
    include,
    ...(exclude.length > 0 ? { exclude: [...configDefaults.exclude, ...exclude] } : {}),
    typecheckEnabled: which !== "release" && part.only === undefined,
    ...(globalSetup.length > 0 ? { globalSetup } : {}),
  };
}

/**
 * The vitest project config of one workspace package. Usage in `vitest.config.ts`:
 * `export default packageProject(import.meta.url)`.
 * @param {string} configUrl `import.meta.url` of the package's vitest.config.ts
 * @param {import("./index.js").ProjectOptions} [options]
 */
export function packageProject(configUrl, options = {}) {
  const root = dirname(fileURLToPath(configUrl));
  const { name } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const app = basename(dirname(root)) === "apps";
  const { include, exclude, typecheckEnabled, globalSetup } = selection(name, options, app);
  const testTimeout = options.testTimeout ?? 30_000;
  const hookTimeout = options.hookTimeout ?? 120_000;
  return {
    root,
    resolve: { alias: workspaceAliases() },
    test: {
      name,
      include,
      ...(exclude ? { exclude } : {}),
      typecheck: {
        enabled: typecheckEnabled,
        include: ["src/**/*.test-d.ts"],
        tsconfig: join(root, "tsconfig.json"),
      },
      benchmark: { include: ["src/**/*.bench.ts", "bench/**/*.bench.ts"] },
      // The bases; each test file scales them by the machine's load as it starts (PATIENT_TIMEOUTS).
      testTimeout,
      hookTimeout,
      setupFiles: [PATIENT_TIMEOUTS],
      provide: { shardkitTimeouts: { testTimeout, hookTimeout } },
      ...(globalSetup ? { globalSetup } : {}),
      ...(options.fileParallelism === false ? { fileParallelism: false } : {}),
    },
  };
}
