import { defineConfig } from "tsup";

/**
 * The one tsup configuration every shardkit library builds with:
 * ESM + CJS, .d.ts + .d.cts, sourcemaps, Node 20 target, dependencies left external.
 * @param {import("./index.js").LibraryOptions} [options]
 */
export function library(options = {}) {
  return defineConfig({
    entry: options.entry ?? ["src/index.ts"],
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
    platform: "node",
    // Splitting (shared chunks) for packages with several entries, so they share one copy of each class.
    splitting: options.splitting ?? false,
    treeshake: true,
    shims: true,
    external: options.external ?? [],
  });
}
