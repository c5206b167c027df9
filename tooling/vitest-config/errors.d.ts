/** A package's `isShardkitError`. */
export type Guard = (value: unknown, code?: string) => boolean;
/** Every code of a package (a Record, so the table is exhaustive): its one class and a public call that throws it. */
export type ErrorTable<Code extends string> = Record<
  Code,
  [cls: { prototype: Error; name: string }, trigger: () => unknown]
>;
/** The error `fn` throws, expected to be an instance of `cls` (fails the test when it throws none). */
export declare function thrownBy<T>(fn: () => unknown, cls: { prototype: T }): T;
/**
 * Registers the error rules of a package: `errors` is its errors module (`import * as errors from
 * "./errors.js"`: its guard and its base class), `byCode` its table, `testUrl` the test's
 * `import.meta.url` (the sources of its folder are read).
 */
export declare function describeErrorRules(
  errors: { isShardkitError: Guard },
  byCode: ErrorTable<string>,
  testUrl: string,
): void;

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/**
 * The rules a package's error types keep, for its type test:
 * `expectTypeOf<ErrorTypeRules<typeof errors, ByCode, Base, ShardkitGuard<ByCode>>>().toEqualTypeOf<ErrorTypeRulesKept>()`,
 * with `errors` the package's entry (`import * as errors from "./index.js"`), `ByCode` its map of
 * codes to classes, `Base` its base class and `Expected` the guard's type, `ShardkitGuard<ByCode>` of
 * @shardkit/id. Each rule is `true` where it is kept.
 */
export type ErrorTypeRules<Module extends { isShardkitError: unknown }, ByCode, Base, Expected> = {
  /** The base's `code` is the package's code type: every key of the map, and no other. */
  everyCode: Same<Base extends { code: infer K } ? K : never, keyof ByCode>;
  /** Each code's class has that code as its literal `code`. */
  oneCodePerClass: Same<
    { [C in keyof ByCode]: ByCode[C] extends { code: infer K } ? K : never },
    { [C in keyof ByCode]: C }
  >;
  /** Every class extends the base, an Error. */
  extendsBase: [ByCode[keyof ByCode]] extends [Base] ? (Base extends Error ? true : false) : false;
  /** The guard is declared `ShardkitGuard<ByCode>`: a code of the package narrows to its class, any other to `ShardkitError` (@shardkit/id's type test checks how). */
  guard: Same<Module["isShardkitError"], Expected>;
};

/** What `ErrorTypeRules` is when every rule is kept. */
export interface ErrorTypeRulesKept {
  everyCode: true;
  oneCodePerClass: true;
  extendsBase: true;
  guard: true;
}
