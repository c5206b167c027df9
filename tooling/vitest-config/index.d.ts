import type { ViteUserConfig } from "vitest/config";
export interface ProjectOptions {
  testTimeout?: number;
  hookTimeout?: number;
  globalSetup?: string[];
  fileParallelism?: boolean;
}
export declare function packageProject(configUrl: string, options?: ProjectOptions): ViteUserConfig;
