import type { PublishedPackageReport } from "./quality.js";

export interface PublishedPackageOptions {
  scripts?: Record<string, string>;
  timeoutMs?: number;
  title?: string;
  check?: (report: PublishedPackageReport) => void;
  /** The README's examples (`examples/x.mjs`, `examples/x.ts`): what each must print, line by line. */
  readme?: Record<string, (lines: string[], readme: string) => void>;
}
/**
 * Registers the published-package test: the package packed with its workspace dependencies and
 * installed in a fresh npm project, publint and are-the-types-wrong clean, and every entry
 * exporting from ESM and CommonJS exactly what its source entry names. `check` adds the package's own;
 * `readme`, the README test (each example verbatim in README.md, and what it prints).
 */
export declare function describePublishedPackage(pkgDir: string, options?: PublishedPackageOptions): void;
