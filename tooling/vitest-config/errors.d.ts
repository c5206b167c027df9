export interface ErrorRules {
  /** Every code of the package (a Record, so the table is exhaustive): its one class and a public call that throws it. */
  byCode: Record<string, [cls: { prototype: Error; name: string }, trigger: () => unknown]>;
  /** The package's base error class (it extends `ShardkitError` of @shardkit/id); its name without `Error` is the word no source may construct. */
  base: { prototype: Error; name: string };
  /** The package's own `isShardkitError`. */
  guard: (value: unknown, code?: string) => boolean;
  /** The package's `src` folder (its non-test sources are read). */
  sourceDir: string;
}
export declare function describeErrorRules(rules: ErrorRules): void;
