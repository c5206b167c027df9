/**
 * The advisory locks shardkit takes, by their first key, in every shard database. One list, so
 * that no two of shardkit's locks ever share a key.
 */
export const LOCKS = Object.freeze({
  /** Changes of ownership records within one database (@shardkit/ownership; one key). */
  ownershipChanges: 7301,
  /** A shard's writers behind a change of its owner (@shardkit/ownership; the shard's bits second). */
  shardWriters: 7302,
  /** The claims of a value unique across shards (the value's hash second). */
  claims: 7303,
  /** Installing and recording shardkit's functions in a database (@shardkit/ownership; one key). */
  install: 7304,
  /** Taking the fleet's balance lease, and making its table (@shardkit/ownership; one key). */
  balance: 7305,
  /** Rolling load windows up (one rollup at a time per database; one key). */
  loadRollup: 7306,
  /** Making or changing the load tables and functions (one key). */
  loadSetup: 7307,
} as const);

/** One of shardkit's own tables that hold shard rows, and how each row names its shard. */
export interface ShardkitTable {
  readonly table: string;
  readonly column: string;
  /** `uuid` (default): the column is a ShardedUUID; `bits`: it holds the shard's 14 bits. */
  readonly kind?: "uuid" | "bits";
}

/**
 * The tables of this package's schema (`schema/shardkit.prisma`) that hold shard rows. A partition
 * map and a move include those a database has without being told: a shard that moved without its
 * claims, processed events or idempotency keys would lose what they guarantee (uniqueness across
 * shards, events applied once, commands decided once).
 */
export const SHARDKIT_TABLES: readonly ShardkitTable[] = Object.freeze([
  { table: "OutboxEvent", column: "id" },
  { table: "IdempotencyKey", column: "shard", kind: "bits" },
  { table: "ProcessedEvent", column: "shard", kind: "bits" },
  { table: "UniqueClaim", column: "shard", kind: "bits" },
  { table: "UniqueClaimToken", column: "shard", kind: "bits" },
] as const);
