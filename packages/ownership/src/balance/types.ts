// The shapes `planBalance` takes and returns: measured load per logical shard, where each shard
// lives, and the plan (its moves, each explaining itself, and the figures before and after).
import type { PlacementCheck } from "@shardkit/prisma";

/** What was measured of one logical shard. A shard with no figure counts as 0 load and 0 bytes. */
export interface ShardLoad {
  /** Load, >= 0, in any unit the same for every shard (e.g. database time per second). */
  load: number;
  /** Its size: what a move copies. Used to prefer cheaper moves (`secondary: "bytes"`). */
  bytes?: number;
  /** Its rows (reported; not used to plan). */
  rows?: number;
}

/** Measured load by shard key (`"group/member"`, `ShardIdentifier.key`). */
export type ShardLoads = Readonly<Record<string, ShardLoad>>;

/** A physical database shards may be placed on. */
export interface BalanceDatabase {
  name: string;
  /** Labels the placement rules (`allows`) read, e.g. `{ region: "eu" }`. */
  labels?: Readonly<Record<string, string>>;
  /** Being emptied (`shardkit drain`): every shard leaves it, none is moved onto it. */
  draining?: boolean;
  /** Relative weight (default 1): a database of capacity 2 is balanced to twice the load. */
  capacity?: number;
}

/** Where each logical shard lives now. */
export interface BalanceFleet {
  databases: readonly BalanceDatabase[];
  shards: readonly { shard: string; database: string }[];
}

export interface BalanceOptions {
  /** Nothing to balance while max/mean database load (per capacity) <= 1 + threshold. 0..10, default 0.10. */
  threshold?: number;
  /**
   * A balancing move must lower the higher of its two databases' loads (per capacity) by at least
   * this fraction of the mean (0..1, default 0.02), or by the shard's whole load (a small shard whose
   * target stays below its source): a move that overshoots and changes little is not worth a copy.
   */
  minImprovement?: number;
  /** Moves in one plan (drain moves included), an integer >= 0 or Infinity. Default 4. */
  maxMoves?: number;
  /** Bytes moved in one plan (>= 0). Default unlimited. */
  maxBytes?: number;
  /** The placement rules (`registry.placement.allows`); default: every shard may live on every database. */
  allows?: PlacementCheck;
  /**
   * Moves of recent runs (the last plans' `moves`, or the databases the partition map holds a
   * `moved` record of the shard on): a shard is never moved back to a database it left, so a
   * balancer that passes its history never undoes its own moves. A plan also never moves a shard
   * back within itself. Draining ignores it when no other database may take the shard.
   */
  recentMoves?: readonly { shard: string; from: string }[];
  /**
   * Only the drain moves: every shard off the draining databases (each at most once, never onto
   * another draining database), and no balancing move between the others (`shardkit drain`).
   */
  drainOnly?: boolean;
  /**
   * `"bytes"` (the default): among moves about as good (within 10% of the best improvement, or
   * each bringing both databases within the threshold), the one that copies fewest bytes.
   * `"none"`: the best improvement, bytes only to break ties.
   */
  secondary?: "bytes" | "none";
}

/** One database's figures. `perCapacity` is what is balanced; `ratio` is it over the mean. */
export interface DatabaseLoad {
  name: string;
  /** The sum of its shards' load. */
  load: number;
  capacity: number;
  perCapacity: number;
  /** perCapacity / mean (0 when no load is recorded). */
  ratio: number;
  shards: number;
  bytes: number;
  draining: boolean;
}

/** Figures of the whole placement. */
export interface BalanceFigures {
  /** The highest database load per capacity. */
  max: number;
  /** Total load over the capacity of the databases that are not draining. */
  mean: number;
  /** max / mean (0 when no load is recorded). */
  ratio: number;
  /** By database, in name order. */
  databases: DatabaseLoad[];
}

/** A move the plan proposes, with why, and its two databases' loads (per capacity) before and after. */
export interface BalanceMove {
  shard: string;
  from: string;
  to: string;
  /** `drain`: off a draining database; `balance`: off an overloaded one. */
  kind: "drain" | "balance";
  load: number;
  bytes: number;
  reason: string;
  before: { from: number; to: number };
  after: { from: number; to: number };
}

/** Why planning stopped. */
export type BalanceStop =
  /** max/mean is within the threshold. */
  | "balanced"
  /** `drainOnly`: the drain moves are planned (`skipped` names any shard that cannot leave), nothing else. */
  | "drained"
  /** Every load figure is 0 (or none was given): nothing to balance. */
  | "no-load"
  /** Over the threshold, but no allowed move improves enough (hot shards, rules, capacity). */
  | "no-move"
  /** `maxMoves` reached: run again to go on. */
  | "max-moves"
  /** The next move would pass `maxBytes`: run again to go on. */
  | "max-bytes";

export interface BalancePlan {
  /** In the order to run them; each assumes the ones before it ran. */
  moves: BalanceMove[];
  before: BalanceFigures;
  /** As if every move ran. */
  after: BalanceFigures;
  /** Shards that should move but will not in this plan, and why (a rule forbids every target, a limit). */
  skipped: { shard: string; reason: string }[];
  /** Shards too hot to balance by moving: alone, each exceeds the mean database load. Never moved to balance. */
  hot: { shard: string; load: number; database: string; reason: string }[];
  stoppedBy: BalanceStop;
  /** One sentence on the outcome, e.g. "no load recorded yet". */
  reason: string;
}
