import type { Options } from "tsup";
export interface LibraryOptions {
  /** Entry points; defaults to `src/index.ts`. */
  entry?: string[];
  /** Extra modules to keep external (dependencies and peers are external already). */
  external?: (string | RegExp)[];
  /** Shared chunks between entries (ESM and CJS), so several entries share one copy of each module. */
  splitting?: boolean;
}
export declare function library(options?: LibraryOptions): Options | Options[];
