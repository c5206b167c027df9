// The shapes of a balance run (`runBalance`): its options, its events, and its report.
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import type { PartitionMap } from "../map.js";
import type { MoveProgress } from "../move.js";
import type { FencedTable } from "../sql.js";
import type { LoadMeasure, MeasuredShard } from "./measure.js";
import type { BalanceMove, BalancePlan, BalanceStop } from "./types.js";

export interface RunBalanceOptions<Client extends ShardClient> {
  /** The databases and where the configuration places each shard (the records say where they are now). */
  registry: ShardRegistry<Client>;
  /**
   * The partition map the moves go through: one the caller has open over `registry` (it is left
   * open). Default: the run opens its own, when it has a move to make, and closes it.
   */
  map?: PartitionMap<Client>;
  /** Every table of the app holding shard rows (as for `moveShard`); shardkit's own are added. */
  tables: readonly FencedTable[];
  /** Every shard leaves this database (`drain`), none is moved onto it, and no other move is made. */
  drain?: Database<Client>;
  /** Measure and plan; change nothing. */
  dryRun?: boolean;
  /** The load measured: the windows of the last `windowMs` ms. Default 300000 (5 minutes). */
  windowMs?: number;
  /** Default `time`. */
  by?: LoadMeasure;
  /** Nothing to do while the most loaded database is within this fraction of the mean. Default 0.10. */
  threshold?: number;
  /** A move must lower the higher of its two databases' loads by this fraction of the mean. Default 0.02. */
  minImprovement?: number;
  /** Moves in this run. Default 4 (`drain`: every shard of the database). */
  maxMoves?: number;
  /** Bytes moved in this run. Default unlimited. */
  maxBytes?: number;
  /**
   * Before each move, wait while a shard not being moved has a p99 (over the last minute of
   * windows) above this, in ms; give up after `maxPauseMs`. Default: no pause.
   */
  maxP99Ms?: number;
  /** How long one pause may last before the run stops (`stoppedBy: "p99"`). Default 300000. */
  maxPauseMs?: number;
  /** `live` (default; PostgreSQL with `wal_level = logical`) or `offline` (PGlite too). */
  mode?: "live" | "offline";
  /** For live moves: how the target's server reaches the source (a libpq URL). Required for `live`. */
  sourceConnection?: (source: Database<Client>) => string;
  verify?: boolean;
  cleanup?: boolean;
  /** How long each database may take to answer a read (the map, the load). Default 10 s. */
  timeoutMs?: number;
  /** How long each database may take to count its shards' rows (full scans). Default 60 s. */
  sizeTimeoutMs?: number;
  copyTimeoutMs?: number;
  /**
   * Each move's lease (as for `moveShard`), and the fleet's balance lease this run holds (one
   * balance or drain per fleet at a time; renewed every third of it). Default 10000.
   */
  leaseMs?: number;
  freezeBudgetMs?: number;
  /**
   * The moves to make, in order, instead of planning them: a plan someone looked at and approved
   * (a dry run's `plan.moves`, e.g. shown on `shardkit dashboard`). The map and the load are still
   * read first (the run refuses when they cannot be), the plan made from them is still reported
   * (`plan`), and each move is still refused when its shard is no longer on its `from` (another
   * mover moved it) or its target breaks a placement rule. `maxMoves` does not apply.
   */
  moves?: readonly BalanceMove[];
  /** Aborted: the move under way ends (moved, or undone), no other starts. */
  signal?: AbortSignal;
  onEvent?: (event: BalanceEvent) => void;
}

/** Progress of a balance run. */
export type BalanceEvent =
  | { type: "measured"; plan: BalancePlan }
  | { type: "move"; index: number; shard: string; from: string; to: string; reason: string }
  | { type: "step"; index: number; shard: string; progress: MoveProgress }
  | { type: "moved"; index: number; shard: string; durationMs: number; freezeMs: number }
  | { type: "pause"; shard: string; p99Ms: number; boundMs: number; waitedMs: number; why: string };

/** A move the run made or tried. */
export interface BalanceMoveDone {
  shard: string;
  from: string;
  to: string;
  /** `takeover`: a move a dead balancer or mover left stopped (its lease lapsed), taken over and made first. */
  kind: "drain" | "balance" | "takeover";
  reason: string;
  status: "moved" | "failed";
  durationMs: number;
  freezeMs: number;
  epoch: number | null;
  error?: string;
  /**
   * A failed move that could not undo itself (`MoveFailedError` with `left: "half-done"`): the
   * shard may be fenced until its lease lapses. The next move of the shard (`shardkit move`)
   * finishes or undoes it first; until then a balance refuses to plan.
   */
  halfDone?: boolean;
  /**
   * A stopped move taken over and undone instead of finished (`to` is then its source), and why:
   * its target may no longer hold the shard (a placement rule forbids it now, or it is being drained).
   */
  undone?: string;
}

export interface BalanceRun {
  ok: boolean;
  dryRun: boolean;
  /** The database drained, else null. */
  drain: string | null;
  by: LoadMeasure;
  windowMs: number;
  /** What stopped the run from starting (or going on): the map or the load could not be read as they should. */
  problems: string[];
  /** The first measurement. */
  shards: MeasuredShard[];
  /** The plan made from the first measurement (a dry run's answer); null when `problems` kept it from planning. */
  plan: BalancePlan | null;
  /** Moves run, in order (none in a dry run). */
  moves: BalanceMoveDone[];
  /** `done`: every move of `moves` was made. */
  stoppedBy: BalanceStop | "dry-run" | "interrupted" | "p99" | "failed" | "refused" | "lease-lost" | "done";
  reason: string;
}
