// The `@shardkit/prisma/internal` entry: what shardkit's own packages (@shardkit/ownership, the
// cli) share with this one, declared once here. Not for applications: it may change in any release.
// Its classes are the main entry's (one shared chunk).

export { atomicRefusals, preparedNaming } from "./atomic-sql.js";
export { databaseIdentities, IDENTITY_COLUMNS, identityOf } from "./budget.js";
export { orAfter, withDeadline } from "./deadline.js";
export { JIT_OFF_OPTION, markJitOff } from "./load/no-jit.js";
export { loadOptionsOf } from "./load/options.js";
export { LoadRecorder } from "./load/recorder.js";
export { CREATE_LOAD_TABLE, DROP_LOAD_TABLES } from "./load/schema.js";
export { FLUSH_LOAD } from "./load/sql.js";
export { toShard } from "./registry.js";
export { backoff, type RetryOptions, retry } from "./retry.js";
export { LOCKS, SHARDKIT_TABLES, type ShardkitTable } from "./shared.js";
export { overSharedPool, type PooledRaw, pooledRaw, SharedPool } from "./shared-pool.js";
export { shardBitsSql } from "./sql.js";
