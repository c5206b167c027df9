export { planBalance } from "./balance/plan.js";
export {
  type BalanceEvent,
  type BalanceMoveDone,
  type BalanceRun,
  type LoadMeasure,
  type MeasuredShard,
  type RunBalanceOptions,
  runBalance,
} from "./balance/run.js";
export type {
  BalanceDatabase,
  BalanceFigures,
  BalanceFleet,
  BalanceMove,
  BalanceOptions,
  BalancePlan,
  BalanceStop,
  DatabaseLoad,
  ShardLoad,
  ShardLoads,
} from "./balance/types.js";
export { checkMove, type MoveCheck, type MoveCheckOptions } from "./check.js";
export {
  BalanceInputError,
  type BalanceInputIssue,
  BalanceLeaseHeldError,
  type BalanceLeaseHolder,
  DatabasesUnansweredError,
  EpochConflictError,
  InvalidMapError,
  isShardkitError,
  MoveFailedError,
  MoveInProgressError,
  MoveLeaseLostError,
  MoveObjectGoneError,
  MovePrecheckError,
  MoveTimeoutError,
  MoveVerifyError,
  OwnershipError,
  type OwnershipErrorByCode,
  type OwnershipErrorCode,
  OwnershipOptionsError,
  PlacementRuleError,
  type Refusal,
  StaleOwnerError,
} from "./errors.js";
export {
  MOVE_JOURNAL_TABLE,
  type MoveJournal,
  type MoveJournalEntry,
  type MoveOutcome,
  type ReadMoveJournalOptions,
  readMoveJournal,
} from "./journal.js";
export { ShardLease } from "./lease.js";
export type { LeaseOptions } from "./lease-take.js";
export { type MapEntry, PartitionMap, type PartitionMapOptions } from "./map.js";
export {
  type MoveOptions,
  type MoveProgress,
  type MoveResult,
  type MoveStep,
  moveShard,
  moveSteps,
} from "./move.js";
export type {
  OwnershipRow,
  OwnershipState,
  ShardOwner,
  ShardRecord,
} from "./owners.js";
export type { MoveObject } from "./records.js";
export { refusalOf } from "./refusal.js";
export type { OwnershipCounters, OwnershipSignal } from "./signals.js";
export {
  type MeasureShardSizesOptions,
  measureShardSizes,
  type ShardSize,
  type ShardSizes,
} from "./sizes.js";
export { type FencedTable, STALE_OWNER_SQLSTATE } from "./sql.js";
export { SHARDKIT_TABLES } from "./tables.js";
export {
  type DatabaseOwnership,
  type MoveLeftover,
  type MoveView,
  type PartitionView,
  type ReadPartitionMapOptions,
  readPartitionMap,
} from "./view.js";
