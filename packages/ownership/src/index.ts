export {
  EpochConflictError,
  InvalidMapError,
  isShardkitError,
  MovePrecheckError,
  MoveTimeoutError,
  MoveVerifyError,
  OwnershipError,
  type OwnershipErrorByCode,
  type OwnershipErrorCode,
  OwnershipOptionsError,
  type Refusal,
  StaleOwnerError,
} from "./errors.js";
export {
  type MapEntry,
  type OwnershipCounters,
  type OwnershipSignal,
  PartitionMap,
  type PartitionMapOptions,
} from "./map.js";
export {
  checkMove,
  type MoveCheck,
  type MoveCheckOptions,
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
  ShardPlacement,
  ShardRecord,
} from "./placement.js";
export { refusalOf } from "./refusal.js";
export { type FencedTable, STALE_OWNER_SQLSTATE } from "./sql.js";
export { SHARDKIT_TABLES } from "./tables.js";
export {
  type DatabaseOwnership,
  type PartitionView,
  type ReadPartitionMapOptions,
  readPartitionMap,
} from "./view.js";
