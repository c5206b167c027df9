import { isShardkitError as isAnyShardkitError, ShardkitError, type ShardkitGuard } from "@shardkit/id";

/** Error codes raised by @shardkit/cli; each is thrown by exactly one class ({@link CliErrorByCode}). */
export type CliErrorCode = keyof CliErrorByCode;

/** Base class of every error @shardkit/cli throws (a `ShardkitError` with a typed code). */
export class CliError<Code extends CliErrorCode = CliErrorCode> extends ShardkitError<Code> {}

/** `INVALID_USAGE`: arguments or options that make no sense (a malformed shard key, no candidate key...). Exit code 2. */
export class UsageError extends CliError<"INVALID_USAGE"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    const list = issues.map((issue) => `  - ${issue}`).join("\n");
    super("INVALID_USAGE", issues.length === 1 ? issues[0]! : `Invalid usage:\n${list}`);
    this.issues = issues;
  }
}

/**
 * `CONFIG_UNAVAILABLE`: no shard configuration to read: neither `--config <file>` nor
 * `SHARDKIT_SHARDS`, a file that cannot be read, or a file that is not JSON. (A configuration that
 * is JSON but wrong is `@shardkit/prisma`'s `RegistryConfigError`.) Exit code 2.
 */
export class ConfigUnavailableError extends CliError<"CONFIG_UNAVAILABLE"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("CONFIG_UNAVAILABLE", message, options);
  }
}

/** `INVALID_SAMPLE_FILE`: a traffic sample that cannot be read or has a line that is not an operation. Exit code 2. */
export class SampleFileError extends CliError<"INVALID_SAMPLE_FILE"> {
  /** The 1-based line of the problem, when it is one line's. */
  readonly line: number | undefined;
  constructor(message: string, options?: { line?: number; cause?: unknown }) {
    super(
      "INVALID_SAMPLE_FILE",
      message,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.line = options?.line;
  }
}

/** `UNKNOWN_DATABASE`: a database named on the command line that the configuration does not list (or names twice). Exit code 2. */
export class UnknownDatabaseError extends CliError<"UNKNOWN_DATABASE"> {
  /** The names the configuration has. */
  readonly known: string[];
  constructor(message: string, known: string[]) {
    super("UNKNOWN_DATABASE", `${message}; the configuration has: ${known.join(", ") || "(none)"}`);
    this.known = known;
  }
}

/** `ADDRESS_IN_USE`: `shardkit dashboard` cannot listen where it was asked (the port is taken). Exit code 2. */
export class AddressInUseError extends CliError<"ADDRESS_IN_USE"> {
  readonly host: string;
  readonly port: number;
  constructor(host: string, port: number, options?: { cause?: unknown }) {
    super(
      "ADDRESS_IN_USE",
      `cannot listen on ${host}:${port}: the port is taken (another dashboard or program uses it); pass --port <n>, or --port 0 for any free one`,
      options,
    );
    this.host = host;
    this.port = port;
  }
}

/** Which class throws which code: each code of @shardkit/cli is thrown by exactly one class. */
export interface CliErrorByCode {
  INVALID_USAGE: UsageError;
  CONFIG_UNAVAILABLE: ConfigUnavailableError;
  INVALID_SAMPLE_FILE: SampleFileError;
  UNKNOWN_DATABASE: UnknownDatabaseError;
  ADDRESS_IN_USE: AddressInUseError;
}

/**
 * True for any shardkit error, from this copy of the package or another one (it checks a global
 * mark and the code, not the class: it is `isShardkitError` of `@shardkit/id`). With a code of
 * this package it narrows to that code's class; with any other code, or none, to `ShardkitError`.
 */
export const isShardkitError: ShardkitGuard<CliErrorByCode> = isAnyShardkitError;
