export interface PublishedPackageReport {
  name: string;
  /** publint --strict output (empty of warnings when the package is clean). */
  publint: string;
  /** are-the-types-wrong on the packed tarball, every resolution mode (node10 included). */
  attw: { ok: boolean; output: string };
  /** export names seen by `import()` in a fresh project. */
  esm: string[];
  /** export names seen by `require()` in a fresh project. */
  cjs: string[];
  /** Every entry of `exports` (the package name and each subpath): export names from `import()` and `require()`. */
  entries: Record<string, { esm: string[]; cjs: string[] }>;
  /** A file importing every entry, type-checked per moduleResolution mode (node10, node16 CJS/ESM, bundler). */
  types: Record<string, { ok: boolean; output: string }>;
  /** Output of each of `options.scripts`, run as ES modules in the fresh project. */
  scripts: Record<string, string>;
  appDir: string;
}
/**
 * Packs the package (and `alsoPack`, its workspace dependencies, in dependency order), installs the
 * tarballs one `npm install` each into a fresh npm project, and checks what a consumer sees. Throws
 * when an entry does not load from ESM and CommonJS alike or does not type-check under node10,
 * node16 or bundler resolution.
 */
export declare function checkPublishedPackage(
  pkgDir: string,
  options?: { alsoPack?: string[]; scripts?: Record<string, string> },
): PublishedPackageReport;
/** `npm install <args>` in `cwd` (quiet, no audit, cache first); killed after `timeoutMs` (default 120 s). Returns stdout. */
export declare function npmInstall(args: string[], cwd: string, options?: { timeoutMs?: number }): string;
/** `pnpm pack` of each directory (workspace: and catalog: specs rewritten), each into its own folder under `dest`; the tarballs' paths, in order. */
export declare function packWorkspacePackages(dirs: string[], dest: string): string[];
/** The version pnpm-workspace.yaml's `catalog:` pins for a package, as written there (`7.10.0`, `^8.16.0`). */
export declare function catalogVersion(name: string): string;
/** The values a source entry exports (type-only exports left out), sorted; refuses `export *`. */
export declare function valueExportsOf(file: string): string[];
/** The folders of the packages named that live under `packages/`, and of those they depend on, dependencies first. */
export declare function inDependencyOrder(names: string[]): string[];
