// What the dashboard's page receives: one snapshot, as JSON, on each update (server-sent events at
// `/api/events`, or `GET /api/state`). Names of databases are display names: `host:port/database`,
// never a user, a password or a query string.

import type { BalanceMove } from "@shardkit/ownership";
import type { DatabaseConnections } from "@shardkit/prisma";

/** The whole page's data at one moment. */
export interface DashboardSnapshot {
  /** When the snapshot was taken (ISO 8601). */
  at: string;
  /** Increases by one with each snapshot. */
  seq: number;
  /** Where the configuration came from: a file name or `SHARDKIT_SHARDS`. */
  config: string;
  /** The load shown: the windows of the last `windowMs`, measured `by`. */
  windowMs: number;
  by: "time" | "calls" | "writes";
  /** The unit of `load` figures: "db ms/s" (time in the database per second), "calls/s" or "writes/s". */
  unit: string;
  /** Whether actions are allowed (`--allow-actions`); the page hides their buttons otherwise. */
  actions: boolean;
  /** What is wrong, most serious first: the page shows them before anything else. */
  problems: DashboardProblem[];
  /** In the configuration's order. */
  databases: DashboardDatabase[];
  /** Every logical shard, in shard order. */
  shards: DashboardShard[];
  /** Moves under way (or stopped half-way: `live: false`). */
  moves: DashboardMove[];
  /** Moves that ended, newest first (the last 50). */
  history: DashboardMoveEnded[];
  /** The balancer's plan over the same window; null until one was made. */
  plan: DashboardPlan | null;
  /** A balance or drain started from the page, while it runs and after it ended; null when none. */
  run: DashboardRun | null;
}

export interface DashboardProblem {
  /** `error`: data may be unreachable or wrong now; `warning`: needs a look. */
  level: "error" | "warning";
  kind:
    | "down"
    | "records"
    | "placement"
    | "stopped-move"
    | "leftover"
    | "dead-letters"
    | "load"
    | "clock"
    | "plan"
    | "in-doubt";
  /** One sentence for people. */
  text: string;
  database?: string;
  shard?: string;
}

export interface DashboardDatabase {
  /** Display name: `host:port/database`. */
  name: string;
  labels: Record<string, string>;
  /** It answered the last probe. */
  up: boolean;
  /** Why it is down. */
  error?: string;
  /** Round trip of the last probe that answered (ms). */
  latencyMs: number | null;
  /** When it last answered (ISO 8601); null: never since the dashboard started. */
  answeredAt: string | null;
  /**
   * Connections (`shardHealth`'s probe of @shardkit/prisma): to this database now (`total`, of them
   * `active` and `idleInTransaction`), to its whole server now, and what the server accepts
   * (max_connections less reserved). Null until it answered.
   */
  connections: DatabaseConnections | null;
  /** The pool the configuration gives each app instance for it (null: not known). */
  pool: number | null;
  /** Outbox lag and dead letters; null values when it did not answer or has no outbox. */
  outbox: { pending: number | null; oldestPendingMs: number | null; dead: number | null };
  /** Its load over the window (sum of its shards', in `unit`) and its share of the whole. */
  load: number;
  share: number;
  /** Its load over time: bucket starts (ms since the epoch) and the load in each bucket (in `unit`). */
  series: { t: number[]; v: number[] };
  /** Shard keys it owns now (by the ownership records). */
  shards: string[];
}

export interface DashboardShard {
  /** `group/member`, e.g. "0/3". */
  key: string;
  /**
   * Display name of the database that holds it now; with state `unknown` (its owner did not
   * answer), the one the records named last. Null only when no database is known at all.
   */
  database: string | null;
  /**
   * `owned`; `moving` (owned, armed for a move); `fenced` (between owners: writes wait);
   * `unrecorded` (no partition map yet: the configuration holds); `unknown` (its owner did not answer).
   */
  state: "owned" | "moving" | "fenced" | "unrecorded" | "unknown";
  epoch: number | null;
  /** Where it is being moved to. */
  movingTo: string | null;
  /** Its load over the window (in `unit`), and that over the hottest shard's (0..1: the cell's colour). */
  load: number;
  heat: number;
  calls: number;
  writes: number;
  p99Ms: number | null;
  /** Its heaviest routing keys: a short hash unless the app records plain keys, and each one's share of the shard's calls. */
  top: { key: string; share: number }[];
  /** The placement rule it breaks where it is now. */
  violates?: string;
}

export interface DashboardMove {
  shard: string;
  from: string;
  to: string;
  mode: "live" | "offline" | null;
  /** The step it is at, and its place among the move's steps (1-based) and their number. */
  step: string;
  stepIndex: number;
  steps: number;
  /** Rows of the shard copied to the target so far, and the rows to copy (null: not yet known). */
  rows: number | null;
  rowsTotal: number | null;
  /** WAL the target is behind the source (live moves, catching up). */
  lagBytes: number | null;
  holder: string;
  startedAt: string | null;
  /** False: its lease lapsed (the mover died or was stopped): the next move of the shard finishes or undoes it. */
  live: boolean;
}

export interface DashboardMoveEnded {
  shard: string;
  from: string;
  to: string;
  /** `moved`; `undone` (rolled back, the shard stayed); `failed` (see `error`). */
  outcome: "moved" | "undone" | "failed";
  mode: "live" | "offline" | null;
  /** How long the shard's writes waited, fence to switch (ms). */
  freezeMs: number | null;
  durationMs: number | null;
  rows: number | null;
  endedAt: string;
  error?: string;
}

export interface DashboardPlan {
  /** When it was made (ISO 8601). */
  at: string;
  /** One sentence on the outcome ("balanced: the busiest database is within 10% of the mean"). */
  reason: string;
  /** Why the plan no longer holds (shards moved since it was made; a new one is being made), or null. */
  stale: string | null;
  stoppedBy: string;
  /** The plan's moves, as the balancer proposes them (databases by display name). */
  moves: BalanceMove[];
  /** Each database's load per capacity before and after the whole plan, and over the mean. */
  databases: { name: string; before: number; after: number; ratioBefore: number; ratioAfter: number }[];
  /** Shards too hot to move. */
  hot: { shard: string; load: number; database: string; reason: string }[];
  skipped: { shard: string; reason: string }[];
  /** What kept it from planning (a database that did not answer, records that cannot be right). */
  problems: string[];
}

export interface DashboardRun {
  kind: "balance" | "drain";
  /** The database drained. */
  database?: string;
  /** `running`; `pausing` (the move under way ends, then it stops); `paused` (resume goes on); `done`; `failed`. */
  state: "running" | "pausing" | "paused" | "done" | "failed";
  startedAt: string;
  /** Moves made and planned. */
  done: number;
  total: number;
  /** The move under way. */
  current: { shard: string; from: string; to: string; step: string } | null;
  /** A balance's moves not made yet, in order: what resume makes (a drain plans its own). */
  left: { shard: string; from: string; to: string }[];
  /** How it ended, or why it waits. */
  reason: string | null;
}
