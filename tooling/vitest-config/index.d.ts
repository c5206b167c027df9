import type { ViteUserConfig } from "vitest/config";
export interface ProjectOptions {
  testTimeout?: number;
  hookTimeout?: number;
  globalSetup?: string[];
  fileParallelism?: boolean;
  /** Projects run in groups, lowest first (default 0, all together): a later group for tests that load the whole machine. */
  groupOrder?: number;
}
export declare function packageProject(configUrl: string, options?: ProjectOptions): ViteUserConfig;
