import { ShardkitError } from "@shardkit/id";

/** Error codes raised by @shardkit/selector. */
export type SelectorErrorCode =
  | "INVALID_CONFIG"
  | "NO_GROUP_MATCH"
  | "MISSING_ROUTING_KEY"
  | "INVALID_ROUTING_KEY"
  | "INVALID_SCORECARD_INPUT";

/**
 * Everything the selector refuses: a bad config (`issues` lists each problem with its path), a row
 * no rule places (and no default group), a missing or malformed routing key, bad scorecard input.
 * The selector never falls back to a guess.
 */
export class SelectorError extends ShardkitError<SelectorErrorCode> {
  /** For `INVALID_CONFIG`: one line per problem, `path: message` (e.g. `groups[1].members[3].weight: must be > 0`). */
  readonly issues: readonly string[];

  constructor(
    code: SelectorErrorCode,
    message: string,
    options?: { cause?: unknown; issues?: readonly string[] },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.issues = Object.freeze([...(options?.issues ?? [])]);
  }
}
