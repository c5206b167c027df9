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
  type OwnershipState,
  PartitionMap,
  type PartitionMapOptions,
} from "./map.js";
export {
  type MoveOptions,
  type MoveProgress,
  type MoveResult,
  type MoveStep,
  moveShard,
} from "./move.js";
export { refusalOf } from "./refusal.js";
export { type FencedTable, STALE_OWNER_SQLSTATE } from "./sql.js";
