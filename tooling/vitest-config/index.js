import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** `@shardkit/<name>` -> its `src/index.ts`, so tests always run against source, never a stale build. */
function workspaceAliases() {
  const dir = join(repoRoot, "packages");
  return readdirSync(dir)
    .filter((name) => existsSync(join(dir, name, "src/index.ts")))
    .map((name) => ({
      find: new RegExp(`^@shardkit/${name}$`),
      replacement: join(dir, name, "src/index.ts"),
    }));
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
  return {
    root,
    resolve: { alias: workspaceAliases() },
    test: {
      name,
      include: ["src/**/*.test.ts", "test/**/*.test.ts"],
      typecheck: { enabled: true, include: ["src/**/*.test-d.ts"], tsconfig: join(root, "tsconfig.json") },
      benchmark: { include: ["src/**/*.bench.ts", "bench/**/*.bench.ts"] },
      testTimeout: options.testTimeout ?? 30_000,
      hookTimeout: options.hookTimeout ?? 120_000,
      ...(options.globalSetup ? { globalSetup: options.globalSetup } : {}),
      ...(options.fileParallelism === false ? { fileParallelism: false } : {}),
    },
  };
}
