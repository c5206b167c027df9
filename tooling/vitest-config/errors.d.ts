export interface ErrorRules {
  /** Every code of the package (a Record, so the table is exhaustive): its one class and a public call that throws it. */
  byCode: Record<string, [cls: { prototype: Error; name: string }, trigger: () => unknown]>;
  /** The package's base error class. */
  base: { prototype: Error };
  /** `ShardkitError` from @shardkit/id. */
  shardkitError: { prototype: Error };
  /** The package's own `isShardkitError`. */
  guard: (value: unknown, code: string) => boolean;
  /** `isShardkitError` from @shardkit/id. */
  anyGuard: (value: unknown, code: string) => boolean;
  /** The package's `src` folder (its non-test sources are read). */
  sourceDir: string;
  /** What no source may contain, e.g. `/\bnew (?:Scatter|Type|Range|Syntax)?Error\(/`. */
  forbidden: RegExp;
}
export declare function describeErrorRules(rules: ErrorRules): void;
