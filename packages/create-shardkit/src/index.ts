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
export { projectName, type ScaffoldOptions, type ScaffoldResult, scaffold } from "./scaffold.js";
export { type LocalPackage, readPackagesDir } from "./tarballs.js";
export { defaultTemplatesDir, listTemplates, type TemplateInfo } from "./templates.js";
