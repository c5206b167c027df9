import type { ViteUserConfig } from "vitest/config";
export interface ProjectOptions {
  testTimeout?: number;
  hookTimeout?: number;
  globalSetup?: string[];
  /** The global setups the release checks (src/package.test.ts) need when they run alone. Default none. */
  releaseGlobalSetup?: string[];
  fileParallelism?: boolean;
}
export declare function packageProject(configUrl: string, options?: ProjectOptions): ViteUserConfig;
/** The release checks' files, relative to a package: they run in a lane of their own in `pnpm test`. */
export declare const RELEASE_CHECKS: string[];
/** Each app's test files that create-shardkit's end-to-end test runs in the installed template, and `pnpm test` leaves to it. */
export declare const END_TO_END: string[];
/** The setup file every project runs first: it scales the default test and hook time limits by the machine's load. */
export declare const PATIENT_TIMEOUTS: string;
