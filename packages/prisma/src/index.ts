export { ScatterError } from "@shardkit/scatter";
export { type ActionOptions, ActionUnit, type ModelKey, type StagedStatus, StagedWrite } from "./action.js";
export type { AtomicRecoveryOption } from "./atomic-auto.js";
export {
  type AtomicRecoveryOptions,
  type AtomicRecoveryReport,
  type InDoubtTransaction,
  recoverAtomic,
  startAtomicRecovery,
} from "./atomic-recover.js";
export {
  type ConnectionBudgetOptions,
  type ConnectionBudgetReport,
  checkConnectionBudget,
  checkDistinctDatabases,
} from "./budget.js";
export type { ClaimBackfillProgress, ClaimBackfillReport, ClaimRepairReport } from "./claims/claim-repair.js";
export { decodeJson, encodeJson } from "./codec.js";
export type { CommandOptions } from "./command.js";
export {
  type FromConfigOptions,
  type ShardRegistryConfig,
  shardRegistryFromConfig,
  shardRegistryFromEnv,
} from "./config.js";
export { withShardDeadline } from "./deadline.js";
export {
  AtomicAbortedError,
  AtomicInDoubtError,
  AtomicUnavailableError,
  CommandUnavailableError,
  ConnectionBudgetError,
  CrossShardError,
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  DirectoryUnavailableError,
  IdempotencyConflictError,
  InvalidEventError,
  isShardkitError,
  MissingModelError,
  NotCommittedError,
  NotInDirectoryError,
  PartialCommitError,
  type PrismaErrorByCode,
  type PrismaShardErrorCode,
  RegistryConfigError,
  RolloutLockTimeoutError,
  RolloutOptionsError,
  RoutingOptionsError,
  ScatterRefusedError,
  SchemaRolloutError,
  type ServerBudget,
  type ShardFailure,
  ShardKeyRequiredError,
  ShardRoutingError,
  ShardTimeoutError,
  UniqueViolationError,
  UnknownShardError,
  UnsupportedShardOperationError,
} from "./errors.js";
export {
  type ScatterPage,
  type ShardLoadHandle,
  type ShardRoutingOptions,
  shardRouting,
} from "./extension.js";
export {
  type DatabaseConnections,
  type DatabaseHealth,
  type DatabaseState,
  type DatabaseStatus,
  type HealthReport,
  type ProbeOptions,
  probeDatabase,
  type ShardHealth,
  type ShardHealthOptions,
  shardHealth,
} from "./health.js";
export {
  consumeOnce,
  type IdempotentCommand,
  type IdempotentOptions,
  type IdempotentOutcome,
  idempotent,
} from "./idempotency.js";
export type { ModelRouting } from "./keys/keys.js";
export {
  LOAD_UNITS,
  type LoadCounts,
  type LoadMeasure,
  loadCount,
  loadFigure,
  windowShare,
  windowsWithin,
} from "./load/figure.js";
export type { LoadOption, LoadOptions } from "./load/options.js";
export {
  type ReadShardLoadOptions,
  readShardLoad,
  type ShardLoadSummary,
  type ShardLoadWindow,
  summarizeLoad,
} from "./load/read.js";
export type { LoadFlushResult } from "./load/recorder.js";
export { LOAD_RESOLUTIONS, type LoadResolution, rollUpLoad } from "./load/rollup.js";
export { LatencySketch, type SketchData } from "./load/sketch.js";
export { LOAD_TABLE } from "./load/sql.js";
export {
  CLOCK_SKEW_LIMIT_MS,
  describeSkew,
  type LoadRouter,
  type LoadSum,
  mergeShardLoad,
  type SumShardLoadOptions,
  skewedRouters,
  sumShardLoad,
  sumWindows,
} from "./load/summary.js";
export { mergeTopKeys, type TopKey } from "./load/top-keys.js";
export { emitEvent, type OutboxEventInput, type OutboxMessage } from "./outbox.js";
export type { OwnershipHook } from "./ownership.js";
export {
  type DatabaseLabels,
  type LabelledDatabase,
  type PlacementCheck,
  type PlacementRule,
  type PlacementRuleInput,
  PlacementRules,
} from "./placement.js";
export {
  createShardRegistry,
  type Database,
  type ReplicaOptions,
  type ShardClient,
  type ShardRef,
  ShardRegistry,
  type ShardRegistryOptions,
  type ShardReplica,
} from "./registry.js";
export {
  createOutboxRelay,
  type OutboxLag,
  type OutboxRelay,
  type OutboxRelayOptions,
  type RedriveFilter,
  type RedriveReport,
  type RelayDatabaseReport,
  type RelayPollReport,
  readOutboxLag,
  redriveOutbox,
} from "./relay/relay.js";
export type {
  KeylessPolicy,
  KeylessScatterOptions,
  ScatterReadOptions,
  ScatterReport,
  ScatterTargetReport,
} from "./scatter/options.js";
export type { ScatterPageArgs } from "./scatter/page.js";
export {
  byColumn,
  byDirectory,
  byHash,
  type ColumnKey,
  type DirectoryKey,
  type HashKey,
  type LegacyIds,
  type RoutedKey,
  type ShardDirectory,
} from "./strategies.js";
export type { TelemetryOption } from "./telemetry.js";
export type { TransactionClient, TransactionOptions } from "./transaction.js";
export { isShardUnavailable, isTransientTransactionError } from "./unavailable.js";
export type { UniqueField } from "./unique.js";
