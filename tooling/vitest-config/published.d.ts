import type { PublishedPackageReport } from "./quality.js";

/**
 * Registers the published-package test: the package packed with its workspace dependencies and
 * installed in a fresh npm project, publint and are-the-types-wrong clean, and every entry
 * exporting from ESM and CommonJS exactly what its source entry names. `check` adds the package's own.
 */
export declare function describePublishedPackage(
  pkgDir: string,
  options?: {
    scripts?: Record<string, string>;
    timeoutMs?: number;
    title?: string;
    check?: (report: PublishedPackageReport) => void;
  },
): void;
