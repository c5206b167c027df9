export {
  type AggregateRequest,
  type AggregateResult,
  type FieldSelection,
  type GroupRow,
  mergeAggregates,
  mergeGroupBy,
  planAggregate,
} from "./aggregate.js";
export {
  decodeCursor,
  encodeCursor,
  isAfter,
  type KeysetFilter,
  type KeysetKey,
  type KeysetPosition,
  keysetSql,
  keysetWhere,
  positionOf,
} from "./cursor.js";
export {
  InvalidCursorError,
  InvalidScatterOptionsError,
  isShardkitError,
  type MissingReason,
  type MissingTarget,
  ScatterAbortedError,
  ScatterDeadlineError,
  ScatterError,
  type ScatterErrorByCode,
  type ScatterErrorCode,
  ScatterFailedError,
  UnsortableValueError,
  UnsortedInputError,
} from "./errors.js";
export { type MergeOptions, mergeSorted } from "./merge-sorted.js";
export { mergePage, type Page, type PagePlan, type PageRequest, planPage } from "./paginate.js";
export {
  type PartialPolicy,
  type ScatterOptions,
  type ScatterResult,
  scatter,
  type TargetOutcome,
} from "./scatter.js";
export {
  compareBy,
  type NormalizedSortKey,
  normalizeOrderBy,
  type OrderByInput,
  type OrderByObject,
  type SortKey,
  type SortValue,
} from "./sort.js";
