export {
  type AnalyzeOptions,
  type AnalyzeReport,
  analyze,
  type CandidateReport,
  type KeyStability,
} from "./analyze.js";
export {
  type BalanceCommandOptions,
  type BalanceEvent,
  type BalanceMoveDone,
  type BalanceReport,
  balance,
  type LoadMeasure,
  type MeasuredShard,
} from "./balance.js";
export type { DashboardReport } from "./commands-dashboard.js";
export type { ConfigOptions } from "./config.js";
export {
  type Dashboard,
  type DashboardOptions,
  type DashboardSnapshot,
  startDashboard,
} from "./dashboard/server.js";
export type {
  DashboardDatabase,
  DashboardMove,
  DashboardMoveEnded,
  DashboardPlan,
  DashboardProblem,
  DashboardRun,
  DashboardShard,
} from "./dashboard/types.js";
export {
  type DoctorCheck,
  type DoctorFinding,
  type DoctorOptions,
  type DoctorReport,
  doctor,
} from "./doctor.js";
export type { DriftReport, SchemaDifference } from "./drift.js";
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
export { type MoveCommandOptions, type MovePlan, type MoveReport, move } from "./move.js";
export { type RedriveOptions, type RedriveReport, redrive } from "./redrive.js";
export { type RolloutCommandOptions, type RolloutEvent, type RolloutReport, rollout } from "./rollout.js";
export { type CliIo, ExitCode, exitCodeOf, run } from "./run.js";
export {
  type StatusAnswer,
  type StatusDatabase,
  type StatusOptions,
  type StatusReport,
  type StatusShard,
  status,
} from "./status.js";
