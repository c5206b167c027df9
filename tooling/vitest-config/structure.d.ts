export interface StructureRules {
  /** The package's `src` folder (its non-test sources are read). */
  sourceDir: string;
  /** The package's name, e.g. `@shardkit/prisma`: no source may import it (or a subpath of it). */
  packageName: string;
  /**
   * Subpath entries, bundled on their own, that import the main entry by the package's name so that
   * both share one copy of its classes (e.g. `zod.ts`). Default none.
   */
  entriesOnMain?: string[];
  /**
   * A browser page's folder (plain ES modules, served as they are): its .js files keep the same
   * rules (no import cycle, about 400 lines a file, about 80 a function). Default none.
   */
  pageDir?: string;
  /**
   * Sides of the package that must stay apart: no module of `modules` imports one of
   * `mustNotReach.modules`, directly or through other modules of the package (type-only imports
   * included). Patterns are paths relative to `sourceDir`: `name.ts`, `move*.ts` (`*` within a
   * name), `balance/` (a folder). Each pattern must match a source file. Default none.
   */
  apart?: ModuleSide[];
}

export interface ModuleSide {
  /** The side, as the test names it (e.g. "the router's side"). */
  name: string;
  modules: string[];
  mustNotReach: { name: string; modules: string[] };
}
export declare function describeModuleStructure(rules: StructureRules): void;
