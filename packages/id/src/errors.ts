const MARK = Symbol.for("shardkit.error");

/** Error codes raised by @shardkit/id; each is thrown by exactly one class ({@link IdErrorByCode}). */
export type IdErrorCode = "INVALID_SHARD" | "INVALID_SHARDED_ID";

/**
 * Base class of every error shardkit throws. `code` is typed per package; `cause` carries the
 * underlying error. Use {@link isShardkitError} rather than `instanceof` where two copies of a
 * package may be installed.
 */
export class ShardkitError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
    Object.defineProperty(this, MARK, { value: true });
  }

  /** Wraps anything thrown into a ShardkitError with the given code, keeping shardkit errors as they are. */
  static from<C extends string>(value: unknown, code: C): ShardkitError<C | string> {
    if (isShardkitError(value)) return value;
    const message = value instanceof Error ? value.message : String(value);
    return new ShardkitError(code, message, { cause: value });
  }
}

/**
 * True for any shardkit error, from this copy of the package or another one (it checks a
 * global symbol mark, not the class identity). With `code`, also checks the code.
 */
export function isShardkitError<C extends string = string>(
  value: unknown,
  code?: C,
): value is ShardkitError<C> {
  if (typeof value !== "object" || value === null || (value as Record<symbol, unknown>)[MARK] !== true)
    return false;
  return code === undefined || (value as { code?: unknown }).code === code;
}

/**
 * The type of each package's `isShardkitError`, the one way a package declares it:
 * `export const isShardkitError: ShardkitGuard<MyErrorByCode> = isShardkitError` (this package's).
 * With a code of the package (a key of `ByCode`) it narrows to that code's class; with any other
 * code, or none, to `ShardkitError`.
 */
export interface ShardkitGuard<ByCode> {
  <C extends keyof ByCode & string>(value: unknown, code: C): value is ByCode[C];
  <C extends string = string>(value: unknown, code?: C): value is ShardkitError<C>;
}

/** A group or member outside its range, a non-integer, or a malformed shard key. */
export class InvalidShardError extends ShardkitError<"INVALID_SHARD"> {
  constructor(message: string) {
    super("INVALID_SHARD", message);
  }
}

/** A value that is not a canonical version-7 UUID with the RFC 9562 variant. */
export class InvalidShardedIdError extends ShardkitError<"INVALID_SHARDED_ID"> {
  readonly value: unknown;
  constructor(value: unknown, reason: string) {
    super("INVALID_SHARDED_ID", `Invalid sharded ID ${describe(value)}: ${reason}`);
    this.value = value;
  }
}

/** Which class throws which code: each code of @shardkit/id is thrown by exactly one class. */
export interface IdErrorByCode {
  INVALID_SHARD: InvalidShardError;
  INVALID_SHARDED_ID: InvalidShardedIdError;
}

function describe(value: unknown): string {
  if (typeof value === "string")
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}...` : value);
  if (value instanceof Uint8Array) return `<${value.length} bytes>`;
  return `(${value === null ? "null" : typeof value})`;
}
