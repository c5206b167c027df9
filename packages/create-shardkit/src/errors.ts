import { isShardkitError as isAnyShardkitError, ShardkitError, type ShardkitGuard } from "@shardkit/id";

/** Error codes raised by create-shardkit; each is thrown by exactly one class ({@link CreateErrorByCode}). */
export type CreateErrorCode = keyof CreateErrorByCode;

/** Which class throws which code: each code of create-shardkit is thrown by exactly one class. */
export interface CreateErrorByCode {
  UNKNOWN_TEMPLATE: UnknownTemplateError;
  TARGET_NOT_EMPTY: TargetNotEmptyError;
  INVALID_PROJECT_NAME: InvalidProjectNameError;
  INVALID_PACKAGES: PackagesDirError;
  INSTALL_FAILED: InstallFailedError;
}

/** Base class of every error create-shardkit throws (a `ShardkitError` with a typed code). */
export class CreateShardkitError<
  Code extends CreateErrorCode = CreateErrorCode,
> extends ShardkitError<Code> {}

/** `UNKNOWN_TEMPLATE`: no template of that name in this copy of create-shardkit. */
export class UnknownTemplateError extends CreateShardkitError<"UNKNOWN_TEMPLATE"> {
  /** The templates there are. */
  readonly known: string[];
  constructor(template: string, known: string[]) {
    super(
      "UNKNOWN_TEMPLATE",
      known.length === 0
        ? `unknown template "${template}": this copy of create-shardkit has no templates (a build without them)`
        : `unknown template "${template}": the templates are ${known.join(", ")}`,
    );
    this.known = known;
  }
}

/** `TARGET_NOT_EMPTY`: the project's folder exists and is not empty (or is not a folder): nothing was written. */
export class TargetNotEmptyError extends CreateShardkitError<"TARGET_NOT_EMPTY"> {
  readonly dir: string;
  constructor(dir: string, what: "not empty" | "not a folder") {
    super(
      "TARGET_NOT_EMPTY",
      `${dir} exists and is ${what}: choose a new folder, or empty this one (nothing was written)`,
    );
    this.dir = dir;
  }
}

/** `INVALID_PROJECT_NAME`: the folder's name does not make an npm package name. */
export class InvalidProjectNameError extends CreateShardkitError<"INVALID_PROJECT_NAME"> {
  readonly projectName: string;
  constructor(projectName: string, reason: string) {
    super("INVALID_PROJECT_NAME", `"${projectName}" cannot name the project's package: ${reason}`);
    this.projectName = projectName;
  }
}

/** `INVALID_PACKAGES`: `--packages` names no folder, a folder without .tgz files, or a tarball that is not an npm package. */
export class PackagesDirError extends CreateShardkitError<"INVALID_PACKAGES"> {
  readonly dir: string;
  constructor(dir: string, reason: string, options?: { cause?: unknown }) {
    super("INVALID_PACKAGES", `--packages ${dir}: ${reason}`, options);
    this.dir = dir;
  }
}

/** `INSTALL_FAILED`: `npm install` in the new project failed; the project's files are written. */
export class InstallFailedError extends CreateShardkitError<"INSTALL_FAILED"> {
  readonly dir: string;
  constructor(dir: string, detail: string, options?: { cause?: unknown }) {
    super(
      "INSTALL_FAILED",
      `npm install in ${dir} failed (${detail}); the project is written: run npm install in it again`,
      options,
    );
    this.dir = dir;
  }
}

/**
 * True for any shardkit error, from this copy of the package or another one (it is `isShardkitError`
 * of `@shardkit/id`: a global mark and the code, not the class). With a code of this package it
 * narrows to that code's class.
 */
export const isShardkitError: ShardkitGuard<CreateErrorByCode> = isAnyShardkitError;
