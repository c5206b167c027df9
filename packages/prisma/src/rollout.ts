// The `@shardkit/prisma/rollout` entry: schema rollout through the WebAssembly schema engine, and
// opening shard databases with it. Its classes are the main entry's (one shared chunk).
export { SchemaRolloutError } from "./errors.js";
export type { DatabaseState, DatabaseStatus, HealthReport, ShardHealth } from "./health.js";
export { type OpenShards, type OpenShardsOptions, openShards } from "./open/open.js";
export type {
  FingerprintState,
  RolloutReport,
  RolloutStatus,
  RolloutTargetReport,
} from "./schema/rollout-report.js";
export {
  type RolloutEvent,
  type RolloutOptions,
  type RolloutTarget,
  rolloutSchema,
} from "./schema/schema-rollout.js";
export { prismaVersions, prismaVersionWarning } from "./versions.js";
