export {
  type CreateErrorByCode,
  type CreateErrorCode,
  CreateShardkitError,
  InstallFailedError,
  InvalidProjectNameError,
  isShardkitError,
  PackagesDirError,
  TargetNotEmptyError,
  UnknownTemplateError,
} from "./errors.js";
export { type CliIo, ExitCode, run } from "./run.js";
export { type ScaffoldOptions, type ScaffoldResult, scaffold } from "./scaffold.js";
