export interface PublishedPackageReport {
  name: string;
  /** publint --strict output (empty of warnings when the package is clean). */
  publint: string;
  /** are-the-types-wrong on the packed tarball. */
  attw: { ok: boolean; output: string };
  /** export names seen by `import()` in a fresh project. */
  esm: string[];
  /** export names seen by `require()` in a fresh project. */
  cjs: string[];
  /** Output of each of `options.scripts`, run as ES modules in the fresh project. */
  scripts: Record<string, string>;
  appDir: string;
}
export declare function checkPublishedPackage(
  pkgDir: string,
  options?: { alsoPack?: string[]; scripts?: Record<string, string> },
): PublishedPackageReport;
