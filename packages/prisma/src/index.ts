export { ScatterError } from "@shardkit/scatter";
export { type ActionOptions, ActionUnit, type ModelKey, type StagedStatus, StagedWrite } from "./action.js";
export {
  type FromConfigOptions,
  type ShardRegistryConfig,
  shardRegistryFromConfig,
  shardRegistryFromEnv,
} from "./config.js";
export {
  CrossShardError,
  PartialCommitError,
  type PrismaShardErrorCode,
  RegistryConfigError,
  ScatterRefusedError,
  type ShardFailure,
  ShardKeyRequiredError,
  ShardRoutingError,
  UnknownShardError,
  UnsupportedShardOperationError,
} from "./errors.js";
export { type ShardRoutingOptions, shardRouting } from "./extension.js";
export { consumeOnce, IdempotencyConflictError, idempotent } from "./idempotency.js";
export { emitEvent, type OutboxEventInput, type OutboxMessage } from "./outbox.js";
export {
  createShardRegistry,
  type PhysicalShard,
  type ShardClient,
  type ShardOrId,
  type ShardRef,
  ShardRegistry,
  type ShardRegistryOptions,
} from "./registry.js";
export {
  createOutboxRelay,
  type OutboxLag,
  type OutboxRelay,
  type OutboxRelayOptions,
  type RelayDatabaseReport,
  type RelayPollReport,
} from "./relay.js";
export type { ModelRouting, RoutePlan } from "./router.js";
export type {
  KeylessPolicy,
  KeylessScatterOptions,
  ScatterReadOptions,
  ScatterReport,
  ScatterTargetReport,
} from "./scatter-reads.js";
export type { TransactionClient, TransactionOptions } from "./transaction.js";
