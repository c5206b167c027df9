import type { Options } from "tsup";
export interface LibraryOptions {
  /** Entry points; defaults to `src/index.ts`. */
  entry?: string[];
  /** Extra modules to keep external (dependencies and peers are external already). */
  external?: (string | RegExp)[];
}
export declare function library(options?: LibraryOptions): Options | Options[];
