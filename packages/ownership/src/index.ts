// The public API of @shardkit/ownership: what its README documents, no more. Every other module
// stays internal (the package's own tests import them by path).
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
export type { BalanceFleet, BalanceMove, BalanceOptions, BalancePlan, ShardLoad } from "./balance/types.js";
export { checkMove, type MoveCheck, type MoveCheckOptions } from "./check.js";
export {
  BalanceInputError,
  BalanceLeaseHeldError,
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
  StaleOwnerError,
} from "./errors.js";
export {
  MOVE_JOURNAL_TABLE,
  type MoveJournal,
  type MoveJournalEntry,
  type ReadMoveJournalOptions,
  readMoveJournal,
} from "./journal.js";
export { ShardLease } from "./lease.js";
export type { LeaseOptions } from "./lease-take.js";
export { PartitionMap, type PartitionMapOptions } from "./map.js";
export { type MoveOptions, type MoveProgress, type MoveResult, moveShard, moveSteps } from "./move.js";
export { refusalOf } from "./refusal.js";
export {
  type MeasureShardSizesOptions,
  measureShardSizes,
  type ShardSize,
  type ShardSizes,
} from "./sizes.js";
export type { FencedTable } from "./sql.js";
export { SHARDKIT_TABLES } from "./tables.js";
export { type PartitionView, type ReadPartitionMapOptions, readPartitionMap } from "./view.js";
