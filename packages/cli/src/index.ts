// The public API of @shardkit/cli: what its README documents ("Programmatic API"), no more. Each
// command's options and the parts of its report stay internal (the report types name them).
export { type AnalyzeReport, analyze } from "./analyze.js";
export { type BalanceReport, balance } from "./balance.js";
export type { DashboardReport } from "./commands-dashboard.js";
export { type Dashboard, type DashboardSnapshot, startDashboard } from "./dashboard/server.js";
export { type DoctorReport, doctor } from "./doctor.js";
export {
  AddressInUseError,
  CliError,
  type CliErrorByCode,
  type CliErrorCode,
  ConfigUnavailableError,
  isShardkitError,
  SampleFileError,
  UnknownDatabaseError,
  UsageError,
} from "./errors.js";
export { type MoveReport, move } from "./move.js";
export { type RecoverReport, recover } from "./recover.js";
export { type RedriveReport, redrive } from "./redrive.js";
export { type RolloutReport, rollout } from "./rollout.js";
export { ExitCode, exitCodeOf, run } from "./run.js";
export { type StatusReport, status } from "./status.js";
