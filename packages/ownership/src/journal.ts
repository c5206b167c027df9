// A move's journal: one row per move attempt in `shardkit."ShardMoveJournal"` on the move's source
// (where its lease is), written by the mover as it goes and read by anyone (`readMoveJournal`): the
// step of a move under way, its rows and lag, and the moves that ended (moved, undone, failed). The
// journal is a record for people, never correctness data: the move never waits for it, except once
// at its end (capped in length), and a journal that cannot be written never fails or delays a move. The file
// is longer than 400 lines: it holds one table's SQL, its writer and its reader, which change together.
import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { orAfter } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { MoveFailedError, MoveTimeoutError, MoveVerifyError, OwnershipOptionsError } from "./errors.js";
import type { ShardLease } from "./lease.js";
import { lastLine, type Raw, raw, unbounded } from "./raw.js";
import { type MoveStep, moveSteps } from "./steps.js";

/** The journal's table, in shardkit's own PostgreSQL schema (beside `shardkit."ShardLoad"`), on each move's source. */
export const MOVE_JOURNAL_TABLE = 'shardkit."ShardMoveJournal"';

/** Ended moves kept per database (the newest); older ones are deleted as each move ends. */
export const MOVE_JOURNAL_KEPT = 500;

/** How a move ended: switched to its target, rolled back cleanly, or neither (it says what it left). */
export type MoveOutcome = "moved" | "undone" | "failed";

/** One move attempt as the journal records it. */
export interface MoveJournalEntry {
  /** The registry name of the database the entry was read from: the move's source. */
  database: string;
  /** The shard's key, `"group/member"`. */
  shard: string;
  /** The move attempt (its replication objects are named after it; a mover taking a stopped move over keeps it). */
  attempt: string;
  /** The source and the target, by registry name (as the mover's registry named them). */
  from: string;
  to: string;
  mode: "live" | "offline";
  /** The step under way (or, once ended, the step it ended at: `done` for a move that finished). */
  step: MoveStep;
  /** Its position in `moveSteps(mode)` (0: `precheck`); `steps` is that list's length. */
  stepIndex: number;
  steps: number;
  /** Rows of the shard last reported: copied so far, or compared (verify); at the end, the rows moved. */
  rows: number | null;
  /** WAL bytes the target was last reported behind the source (live moves: catch-up). */
  lagBytes: number | null;
  /** The mover that held the lease. */
  holder: string;
  /** By the mover's clock: when the move started, when this state was reported, when it ended. */
  startedAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
  /** Null while under way (or stopped: see `stopped`). */
  outcome: MoveOutcome | null;
  /** How long the shard's writes were held, fence to switch (`moved` only). */
  freezeMs: number | null;
  durationMs: number | null;
  /** The error the move failed with (`undone`, `failed`). */
  error: string | null;
  /** The mover that ended it when another than `holder` (a stopped move taken over and finished or undone). */
  endedBy: string | null;
  /**
   * Not ended, and its lease is not held any more: its mover stopped (crashed, or lost its lease).
   * The next move of the shard takes it over and finishes or undoes it.
   */
  stopped: boolean;
}

export interface ReadMoveJournalOptions {
  /** How long each database may take to answer. Default 2000 ms. */
  timeoutMs?: number;
  /** The newest entries to return, over every database. Default 100. */
  limit?: number;
}

export interface MoveJournal {
  /** Newest first (by when the move started). */
  entries: MoveJournalEntry[];
  /** The databases that did not answer in time or failed: their entries are not in `entries`. */
  unanswered: { database: string; error: string }[];
}

/** Made on a database's first write (each `IF NOT EXISTS`: two movers racing are fine, see `ensureTable`). */
const CREATE = [
  "CREATE SCHEMA IF NOT EXISTS shardkit",
  `CREATE TABLE IF NOT EXISTS ${MOVE_JOURNAL_TABLE} (
  shard integer NOT NULL,
  attempt text NOT NULL,
  source text NOT NULL,
  target text NOT NULL,
  mode text NOT NULL,
  step text NOT NULL,
  step_index integer NOT NULL,
  steps integer NOT NULL,
  rows bigint,
  lag_bytes bigint,
  holder text NOT NULL,
  started_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  ended_at timestamptz,
  outcome text,
  freeze_ms integer,
  duration_ms integer,
  error text,
  ended_by text,
  PRIMARY KEY (shard, attempt)
)`,
];

const COLUMNS =
  "shard, attempt, source, target, mode, step, step_index, steps, rows, lag_bytes, holder, started_at, updated_at, ended_at, outcome, freeze_ms, duration_ms, error";

/**
 * A move's state, whole (`$1`, JSON): each write replaces the row, and never one that ended (a
 * late progress write cannot undo the move's end).
 */
const UPSERT = `INSERT INTO ${MOVE_JOURNAL_TABLE} AS j (${COLUMNS})
SELECT ${COLUMNS} FROM jsonb_to_record($1::jsonb) AS r(
  shard integer, attempt text, source text, target text, mode text, step text, step_index integer,
  steps integer, rows bigint, lag_bytes bigint, holder text, started_at timestamptz,
  updated_at timestamptz, ended_at timestamptz, outcome text, freeze_ms integer, duration_ms integer,
  error text
)
ON CONFLICT (shard, attempt) DO UPDATE SET
  source = EXCLUDED.source, target = EXCLUDED.target, mode = EXCLUDED.mode, step = EXCLUDED.step,
  step_index = EXCLUDED.step_index, steps = EXCLUDED.steps, rows = EXCLUDED.rows,
  lag_bytes = EXCLUDED.lag_bytes, holder = EXCLUDED.holder, updated_at = EXCLUDED.updated_at,
  ended_at = EXCLUDED.ended_at, outcome = EXCLUDED.outcome, freeze_ms = EXCLUDED.freeze_ms,
  duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error
WHERE j.ended_at IS NULL`;

/** Ended moves beyond the newest `$1` on this database. */
const TRIM = `DELETE FROM ${MOVE_JOURNAL_TABLE} WHERE (shard, attempt) IN (
  SELECT shard, attempt FROM ${MOVE_JOURNAL_TABLE} WHERE ended_at IS NOT NULL
  ORDER BY ended_at DESC OFFSET $1::integer)`;

/** A stopped move's row, ended by the mover that took it over (`$1` shard, `$2` attempt, `$3` outcome, `$4` when, `$5` error, `$6` by). */
const END_STOPPED = `UPDATE ${MOVE_JOURNAL_TABLE} SET outcome = $3, ended_at = $4::timestamptz,
  updated_at = $4::timestamptz, error = $5, ended_by = $6, lag_bytes = NULL
WHERE shard = $1::integer AND attempt = $2 AND ended_at IS NULL`;

const PRESENT = `SELECT to_regclass('${MOVE_JOURNAL_TABLE}') IS NOT NULL AS journal,
  to_regclass(quote_ident('ShardMove')) IS NOT NULL AS moves`;

/** The newest `$1` entries; `leased`: a move record of the same attempt holds its lease now (a database without `ShardMove` has none). */
const READ = (moves: boolean) => `SELECT shard, attempt, source, target, mode, step, step_index, steps,
  rows::float8 AS rows, lag_bytes::float8 AS lag_bytes, holder, started_at, updated_at, ended_at,
  outcome, freeze_ms, duration_ms, error, ended_by,
  ${
    moves
      ? `EXISTS (SELECT 1 FROM "ShardMove" m WHERE m.shard = j.shard
      AND coalesce(to_jsonb(m) ->> 'attempt', '') = j.attempt AND m.step <> 'abandoned'
      AND (to_jsonb(m) ->> 'expiresAt')::timestamptz > clock_timestamp())`
      : "false"
  } AS leased
FROM ${MOVE_JOURNAL_TABLE} j ORDER BY started_at DESC, attempt LIMIT $1`;

/** A journal row as the mover writes it. */
interface Row {
  shard: number;
  attempt: string;
  source: string;
  target: string;
  mode: "live" | "offline";
  step: MoveStep;
  step_index: number;
  steps: number;
  rows: number | null;
  lag_bytes: number | null;
  holder: string;
  started_at: string;
  updated_at: string;
  ended_at: string | null;
  outcome: MoveOutcome | null;
  freeze_ms: number | null;
  duration_ms: number | null;
  error: string | null;
}

/** An error's message as the journal keeps it (capped in length). */
function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > 4000 ? `${text.slice(0, 4000)}…` : text;
}

/** PostgreSQL's SQLSTATE of `error`, looked for through Prisma's wrapping and causes. */
function sqlState(error: unknown): string | undefined {
  const seen: unknown[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.length < 10) {
    const e = queue.shift() as
      | { code?: unknown; originalCode?: unknown; cause?: unknown; meta?: { driverAdapterError?: unknown } }
      | undefined;
    if (!e || typeof e !== "object" || seen.includes(e)) continue;
    seen.push(e);
    for (const code of [e.originalCode, e.code])
      if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith("P")) return code;
    queue.push(e.cause, e.meta?.driverAdapterError);
  }
  const found = /\b(23505|42P07|42710)\b/.exec(String((error as Error | undefined)?.message ?? ""));
  return found?.[1];
}

/** What PostgreSQL raises at the loser of two `CREATE ... IF NOT EXISTS` of one object at once. */
const CREATE_RACE = new Set(["23505", "42P07", "42710"]);

/**
 * The schema and table, made if missing. Two writers making them at once can collide in
 * PostgreSQL's catalog despite `IF NOT EXISTS` (23505 on `pg_namespace` or `pg_type`, 42710 "type
 * already exists", 42P07): the loser runs them again once, after the winner committed, and finds
 * them made.
 */
async function ensureTable(db: Raw): Promise<void> {
  const run = async () => {
    for (const ddl of CREATE) await db.$executeRawUnsafe(ddl);
  };
  try {
    await run();
  } catch (error) {
    const state = sqlState(error);
    if (state === undefined || !CREATE_RACE.has(state)) throw error;
    await run();
  }
}

/** Writes `row`, making the table first when the write fails and it was not made by this writer yet. */
async function upsert(db: Raw, row: Row, made: { table: boolean }): Promise<void> {
  const json = JSON.stringify(row);
  try {
    await db.$executeRawUnsafe(UPSERT, json);
  } catch (error) {
    if (made.table) throw error;
    await ensureTable(db);
    made.table = true;
    await db.$executeRawUnsafe(UPSERT, json);
  }
  made.table = true;
}

/** How long a move waits for its journal's last write, at most (ms; `copyTimeoutMs` if shorter). */
export const MOVE_JOURNAL_END_TIMEOUT_MS = 5_000;

/** What the journal reads of a move's lease. */
type Held<Client extends ShardClient> = Pick<
  ShardLease<Client>,
  "shard" | "attempt" | "holder" | "from" | "to"
>;

/**
 * The mover's writer of one move attempt's row, on its source, from the lease on (its first
 * `report` is the lease). `report` (each
 * step, each progress) never waits and never fails: one write in flight at a time, the newest state
 * waiting behind it (an older one waiting is replaced), errors dropped. `finish` is the one write
 * the move waits for, bounded, and it never fails either. Every write runs outside the move's
 * deadline (`unbounded`).
 */
export class MoveJournalWriter<Client extends ShardClient = ShardClient> {
  private readonly row: Row;
  private readonly source: Database<Client>;
  private readonly order: readonly MoveStep[];
  private readonly timeoutMs: number;
  private readonly made = { table: false };
  private sending: Promise<void> | undefined;
  private pending = false;
  private ended = false;

  constructor(
    held: Held<Client>,
    move: {
      mode: "live" | "offline";
      cleanup: boolean;
      /** When the move started, `performance.now()`. */
      started: number;
      copyTimeoutMs: number;
    },
  ) {
    this.source = held.from;
    this.order = moveSteps(move.mode, { cleanup: move.cleanup });
    this.timeoutMs = Math.min(move.copyTimeoutMs, MOVE_JOURNAL_END_TIMEOUT_MS);
    const started = new Date(performance.timeOrigin + move.started).toISOString();
    this.row = {
      shard: held.shard.bits,
      attempt: held.attempt,
      source: held.from.name,
      target: held.to.name,
      mode: move.mode,
      step: "lease",
      step_index: this.order.indexOf("lease"),
      steps: this.order.length,
      rows: null,
      lag_bytes: null,
      holder: held.holder,
      started_at: started,
      updated_at: started,
      ended_at: null,
      outcome: null,
      freeze_ms: null,
      duration_ms: null,
      error: null,
    };
  }

  /** The move is at `step` (rows and lag as last reported, unless given). Written soon, never waited for. */
  report(step: MoveStep, extra: { rows?: number | undefined; lagBytes?: number | undefined } = {}): void {
    if (this.ended) return;
    this.at(step);
    if (extra.rows !== undefined) this.row.rows = extra.rows;
    if (extra.lagBytes !== undefined) this.row.lag_bytes = extra.lagBytes;
    this.pending = true;
    this.pump();
  }

  /**
   * The move's end: moved (its freeze and rows), or the error it throws (`undone` or `failed`, see
   * `outcomeOf`). A move another mover took from this one is left to that mover to end.
   */
  async finish(
    ending: { error: unknown } | { freezeMs: number; rows: Record<string, number> },
    durationMs: number,
  ): Promise<void> {
    if (!("error" in ending))
      return this.end({
        outcome: "moved",
        step: "done",
        freezeMs: ending.freezeMs,
        durationMs,
        rows: Object.values(ending.rows).reduce((a, b) => a + b, 0),
      });
    if (!takenOver(ending.error))
      return this.end({ outcome: outcomeOf(ending.error), durationMs, error: ending.error });
    this.ended = true; // the move is another mover's now: it ends the row (`endStoppedMove`)
    this.pending = false;
  }

  /**
   * Writes the move's end and waits for it (up to 5 s, or `copyTimeoutMs` if shorter); a source
   * that does not answer or fails is given up on (nothing is thrown). Ended moves beyond the newest
   * `MOVE_JOURNAL_KEPT` on the source are deleted.
   */
  async end(ending: {
    outcome: MoveOutcome;
    step?: MoveStep;
    freezeMs?: number;
    durationMs: number;
    rows?: number;
    error?: unknown;
  }): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.pending = false;
    if (ending.step) this.at(ending.step);
    const now = new Date().toISOString();
    Object.assign(this.row, {
      updated_at: now,
      ended_at: now,
      outcome: ending.outcome,
      freeze_ms: ending.freezeMs ?? null,
      duration_ms: Math.round(ending.durationMs),
      error: ending.error === undefined ? null : messageOf(ending.error),
      ...(ending.rows !== undefined ? { rows: ending.rows } : {}),
      ...(ending.outcome === "moved" ? { lag_bytes: null } : {}),
    });
    const row = { ...this.row };
    // Sent at once, beside a progress write in flight: an ended row is never written over.
    await settle(this.timeoutMs, () =>
      unbounded(async () => {
        const db = raw(this.source);
        await upsert(db, row, this.made);
        await db.$executeRawUnsafe(TRIM, MOVE_JOURNAL_KEPT);
      }),
    );
  }

  private at(step: MoveStep): void {
    this.row.step = step;
    const index = this.order.indexOf(step);
    if (index >= 0) this.row.step_index = index;
    this.row.updated_at = new Date().toISOString();
  }

  private pump(): void {
    if (this.sending || !this.pending || this.ended) return;
    this.pending = false;
    const row = { ...this.row };
    this.sending = unbounded(() => upsert(raw(this.source), row, this.made))
      .catch(() => {}) // the journal is for people: a write that fails is dropped, the next one tries again
      .finally(() => {
        this.sending = undefined;
        this.pump();
      });
  }
}

/**
 * The row of a stopped move this mover took over (`held`) and finished or undid (`resumed`), or
 * failed to (`{ error }`), ended as such on its source (by `held.holder`); a row ended already, or
 * none (a mover of an earlier version), is left as it is, and so is a move yet another mover took
 * from this one (that one ends it). Waited for up to 5 s (or `copyTimeoutMs`); never throws.
 */
export async function endStoppedMove<Client extends ShardClient>(
  held: Held<Client>,
  resumed: "rolled-forward" | "rolled-back" | { error: unknown },
  copyTimeoutMs: number,
): Promise<void> {
  if (typeof resumed === "object" && takenOver(resumed.error)) return;
  const error = typeof resumed === "object" ? resumed.error : undefined;
  const outcome =
    typeof resumed === "object"
      ? outcomeOf(resumed.error)
      : resumed === "rolled-forward"
        ? "moved"
        : "undone";
  await settle(Math.min(copyTimeoutMs, MOVE_JOURNAL_END_TIMEOUT_MS), () =>
    unbounded(() =>
      raw(held.from).$executeRawUnsafe(
        END_STOPPED,
        held.shard.bits,
        held.attempt,
        outcome,
        new Date().toISOString(),
        error === undefined ? null : messageOf(error),
        held.holder,
      ),
    ),
  );
}

/** `run()`, waited for up to `timeoutMs`; its failure or lateness is dropped (the journal is for people). */
async function settle(timeoutMs: number, run: () => Promise<unknown>): Promise<void> {
  await orAfter(timeoutMs, undefined, () =>
    Promise.resolve()
      .then(run)
      .catch(() => {}),
  );
}

/**
 * How a move that threw `error` (what `failed` made of its failure) ended: `undone` when it was
 * rolled back and nothing of it is left, `failed` otherwise (it left a half-done move, or another
 * mover took it over).
 */
export function outcomeOf(error: unknown): Exclude<MoveOutcome, "moved"> {
  if (error instanceof MoveVerifyError) return "undone"; // returned by `failed` only once undone
  if (error instanceof MoveTimeoutError) return error.undone ? "undone" : "failed";
  if (error instanceof MoveFailedError) return error.left === "undone" ? "undone" : "failed";
  return "failed";
}

/**
 * Whether a move that threw `error` is another mover's now (this one lost its lease to it): that
 * mover finishes or undoes it, and ends its journal row (`endStoppedMove`), not this one.
 */
export function takenOver(error: unknown): boolean {
  return error instanceof MoveFailedError && error.left === "taken-over";
}

/** What a database returns for one entry. */
interface ReadRow {
  shard: number;
  attempt: string;
  source: string;
  target: string;
  mode: string;
  step: string;
  step_index: number;
  steps: number;
  rows: number | null;
  lag_bytes: number | null;
  holder: string;
  started_at: Date | string;
  updated_at: Date | string;
  ended_at: Date | string | null;
  outcome: string | null;
  freeze_ms: number | null;
  duration_ms: number | null;
  error: string | null;
  ended_by: string | null;
  leased: boolean;
}

const dateOf = (value: Date | string) => (value instanceof Date ? value : new Date(value));
const numberOrNull = (value: unknown) => (value === null || value === undefined ? null : Number(value));

/**
 * The move journal of every database of `registry`, read at once (each bounded by `timeoutMs`):
 * moves under way (their step, rows, lag) and moves that ended (moved, undone, failed), newest
 * first, at most `limit`. It only reads: a database without the journal (no move started there yet)
 * has no entries; one that did not answer in time, or failed, is listed in `unanswered`.
 */
export async function readMoveJournal<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ReadMoveJournalOptions = {},
): Promise<MoveJournal> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const limit = options.limit ?? 100;
  const issues: string[] = [];
  if (!registry || !Array.isArray(registry.databases)) issues.push("registry: required");
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 1))
    issues.push(`timeoutMs: expected a number >= 1, got ${timeoutMs}`);
  if (!(Number.isSafeInteger(limit) && limit >= 1))
    issues.push(`limit: expected an integer >= 1, got ${limit}`);
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  const result = await scatter(
    registry.databases,
    async (physical) => {
      const db = raw(physical);
      const [present] = await db.$queryRawUnsafe<{ journal: boolean; moves: boolean }[]>(PRESENT);
      if (!present?.journal) return [];
      return db.$queryRawUnsafe<ReadRow[]>(READ(present.moves), limit);
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => String(p.index) },
  );
  const entries: MoveJournalEntry[] = [];
  for (const outcome of result.outcomes) {
    if (outcome.status !== "fulfilled") continue;
    for (const r of outcome.value) {
      entries.push({
        database: outcome.target.name,
        shard: ShardIdentifier.fromBits(Number(r.shard)).key,
        attempt: r.attempt,
        from: r.source,
        to: r.target,
        mode: r.mode as MoveJournalEntry["mode"],
        step: r.step as MoveStep,
        stepIndex: Number(r.step_index),
        steps: Number(r.steps),
        rows: numberOrNull(r.rows),
        lagBytes: numberOrNull(r.lag_bytes),
        holder: r.holder,
        startedAt: dateOf(r.started_at),
        updatedAt: dateOf(r.updated_at),
        endedAt: r.ended_at === null ? null : dateOf(r.ended_at),
        outcome: r.outcome as MoveOutcome | null,
        freezeMs: numberOrNull(r.freeze_ms),
        durationMs: numberOrNull(r.duration_ms),
        error: r.error,
        endedBy: r.ended_by,
        stopped: r.outcome === null && !r.leased,
      });
    }
  }
  entries.sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime());
  const unanswered = result.missing.map((m) => ({
    database: m.target.name,
    error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
  }));
  return { entries: entries.slice(0, limit), unanswered };
}
