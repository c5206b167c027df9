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
export type { BalanceFleet, BalanceMove, ShardLoad } from "./balance/types.js";
export { checkMove, type MoveCheck } from "./check.js";
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
export { MOVE_JOURNAL_TABLE, type MoveJournalEntry, readMoveJournal } from "./journal.js";
export { ShardLease } from "./lease.js";
export { PartitionMap } from "./map.js";
export { type MoveProgress, type MoveResult, moveShard, moveSteps } from "./move.js";
export { refusalOf } from "./refusal.js";
export { measureShardSizes } from "./sizes.js";
export type { FencedTable } from "./sql.js";
export { SHARDKIT_TABLES } from "./tables.js";
export { type PartitionView, readPartitionMap } from "./view.js";
