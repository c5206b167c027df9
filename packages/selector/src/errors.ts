import { isShardkitError as isAnyShardkitError, ShardkitError, type ShardkitGuard } from "@shardkit/id";

/** Error codes raised by @shardkit/selector; each is thrown by exactly one class ({@link SelectorErrorByCode}). */
export type SelectorErrorCode =
  /** The config is invalid: `issues` lists every problem with its path. */
  | "INVALID_SELECTOR_CONFIG"
  /** No rule places the row and there is no default group. */
  | "NO_GROUP_MATCH"
  /** The row has no routing key (or no `splitBy` value for a pre-split tenant). */
  | "MISSING_ROUTING_KEY"
  /** The routing key is not a non-empty string, a finite number or a bigint. */
  | "INVALID_ROUTING_KEY"
  /** `analyzeShardKey` was given samples or options it cannot score. */
  | "INVALID_SCORECARD_INPUT"
  /** `select` / `explain` were given something that is not a row's properties (null, an array, a string). */
  | "INVALID_PROPERTIES";

/** Which class throws which code: each code of @shardkit/selector is thrown by exactly one class. */
export interface SelectorErrorByCode {
  INVALID_SELECTOR_CONFIG: InvalidSelectorConfigError;
  NO_GROUP_MATCH: NoGroupMatchError;
  MISSING_ROUTING_KEY: MissingRoutingKeyError;
  INVALID_ROUTING_KEY: InvalidRoutingKeyError;
  INVALID_SCORECARD_INPUT: InvalidScorecardInputError;
  INVALID_PROPERTIES: InvalidPropertiesError;
}

/**
 * Base class of everything the selector refuses: one subclass per code (see
 * {@link SelectorErrorByCode}), so `instanceof SelectorError` catches all of them. The selector
 * never falls back to a guess.
 */
export class SelectorError<Code extends SelectorErrorCode = SelectorErrorCode> extends ShardkitError<Code> {
  /** For `INVALID_SELECTOR_CONFIG`: one line per problem, `path: message` (e.g. `groups[1].members[3].weight: must be > 0`); empty for the other codes. */
  readonly issues: readonly string[];

  protected constructor(
    code: Code,
    message: string,
    options?: { cause?: unknown; issues?: readonly string[] },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.issues = Object.freeze([...(options?.issues ?? [])]);
  }
}

/** The class of one code whose errors carry a message and a cause: `class X extends coded("CODE") {}`. */
type Coded<C extends SelectorErrorCode> = new (message: string, options?: ErrorOptions) => SelectorError<C>;
function coded<C extends SelectorErrorCode>(code: C): Coded<C> {
  return class extends SelectorError<C> {
    constructor(message: string, options?: ErrorOptions) {
      super(code, message, options);
    }
  };
}

/** `INVALID_SELECTOR_CONFIG`: a config that cannot work; the message and `issues` list every problem with its path. */
export class InvalidSelectorConfigError extends SelectorError<"INVALID_SELECTOR_CONFIG"> {
  constructor(issues: readonly string[], options?: { cause?: unknown }) {
    super(
      "INVALID_SELECTOR_CONFIG",
      `Invalid shard selector config (${issues.length} issue${issues.length === 1 ? "" : "s"}):\n  - ${issues.join("\n  - ")}`,
      { ...options, issues },
    );
  }
}

/** `NO_GROUP_MATCH`: no rule places the row and there is no default group, so the selector refuses to guess. */
export class NoGroupMatchError extends coded("NO_GROUP_MATCH") {}

/** `MISSING_ROUTING_KEY`: the row lacks the routing key (or a pre-split tenant's `splitBy` value). */
export class MissingRoutingKeyError extends coded("MISSING_ROUTING_KEY") {}

/** `INVALID_ROUTING_KEY`: the routing key is not a non-empty string, a finite number or a bigint. */
export class InvalidRoutingKeyError extends coded("INVALID_ROUTING_KEY") {}

/** `INVALID_SCORECARD_INPUT`: a sample or an option of `analyzeShardKey` that cannot be scored. */
export class InvalidScorecardInputError extends coded("INVALID_SCORECARD_INPUT") {}

/** `INVALID_PROPERTIES`: `select` or `explain` got something that is not an object of the row's properties. */
export class InvalidPropertiesError extends coded("INVALID_PROPERTIES") {}

/**
 * True for any shardkit error, from this copy of the package or another one (it checks a global
 * mark and the code, not the class: it is `isShardkitError` of `@shardkit/id`). With a code of
 * this package it narrows to that code's class, e.g.
 * `if (isShardkitError(err, "INVALID_SELECTOR_CONFIG")) err.issues`; with any other code, or
 * none, to `ShardkitError`.
 */
export const isShardkitError: ShardkitGuard<SelectorErrorByCode> = isAnyShardkitError;
