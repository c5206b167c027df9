// A balance run: measure each logical shard's load (the windows routers flush to
// `shardkit."ShardLoad"`) and size, plan with `planBalance`, and run the plan one move at a time
// through `moveShard`, measuring again between moves. `shardkit balance` and `shardkit drain` are
// this over the CLI's configuration; an app or a test runs it over its own registry (PGlite too).
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { OwnershipOptionsError } from "../errors.js";
import { DEFAULT_LEASE_MS } from "../lease-take.js";
import { PartitionMap } from "../map.js";
import { type MoveProgress, moveShard } from "../move.js";
import { lastLine } from "../raw.js";
import type { FencedTable } from "../sql.js";
import { readPartitionMap } from "../view.js";
import { BalanceLease } from "./lease.js";
import { type LoadMeasure, type MeasuredShard, type Measurement, measure } from "./measure.js";
import { waitForCalm } from "./pause.js";
import { planBalance } from "./plan.js";
import type { BalanceMove, BalancePlan, BalanceStop } from "./types.js";

export type { LoadMeasure, MeasuredShard };

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

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * Measures, plans and runs a balance over `registry` (see `RunBalanceOptions`). The load of each
 * logical shard is what routers recorded in the last `windowMs`, wherever they flushed it (it is
 * per shard, so it needs no moving with the shard); shards are placed where the ownership records
 * say. Each move is `moveShard` (its lease fences a second mover; placement rules refuse a target
 * that breaks them), one at a time, the load measured again after each. A run stopped (aborted, a
 * failure, a crash) is resumed by running it again: it plans from where shards are then, and a
 * move that stopped half-way is finished or undone by the next move of its shard. Settings out of
 * range throw `BalanceInputError` before any database is read.
 *
 * One balance or drain run per fleet at a time: a run that is not a dry run first takes the fleet's
 * balance lease (`BalanceLeaseHeldError`, naming its holder, while another run holds it), renews
 * it while it works, checks it before each move (a run whose lease lapsed and was taken by another
 * stops, `lease-lost`), and gives it up at its end.
 */
export async function runBalance<Client extends ShardClient>(
  options: RunBalanceOptions<Client>,
): Promise<BalanceRun> {
  const checked = checkOptions(options);
  if (options.dryRun) return balanceRun(options, checked, undefined);
  const lease = await BalanceLease.take(
    options.registry,
    options.drain ? `drain of ${options.drain.name}` : "balance",
    { leaseMs: options.leaseMs ?? DEFAULT_LEASE_MS, timeoutMs: checked.timeoutMs },
  );
  try {
    return await balanceRun(options, checked, lease);
  } finally {
    await lease.release();
  }
}

type Checked = ReturnType<typeof checkOptions>;

/** The run's settings, checked before any database is read: `OwnershipOptionsError`, `BalanceInputError`. */
function checkOptions<Client extends ShardClient>(options: RunBalanceOptions<Client>) {
  const by = options.by ?? "time";
  const windowMs = options.windowMs ?? 300_000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const mode = options.mode ?? "live";
  const issues: string[] = [];
  if (!["time", "calls", "writes"].includes(by))
    issues.push(`by: expected time, calls or writes, got ${JSON.stringify(by)}`);
  if (mode !== "live" && mode !== "offline")
    issues.push(`mode: expected live or offline, got ${JSON.stringify(mode)}`);
  for (const [name, value] of [
    ["windowMs", windowMs],
    ["timeoutMs", timeoutMs],
    ["sizeTimeoutMs", options.sizeTimeoutMs],
    ["maxP99Ms", options.maxP99Ms],
    ["maxPauseMs", options.maxPauseMs],
    ["copyTimeoutMs", options.copyTimeoutMs],
    ["leaseMs", options.leaseMs],
    ["freezeBudgetMs", options.freezeBudgetMs],
  ] as const)
    if (value !== undefined && !(Number.isFinite(value) && value > 0))
      issues.push(`${name}: expected a positive number of ms, got ${value}`);
  if (mode === "live" && !options.dryRun && !options.sourceConnection)
    issues.push("sourceConnection: required for live moves (how the target's server reaches the source)");
  if (options.map && options.map.registry !== options.registry)
    issues.push("map: a partition map over another registry");
  // A map of the run's own would replace the one attached to the registry's routing, and detach it
  // when closed: the app would stop following moves.
  if (!options.map && !options.dryRun && options.registry.ownership)
    issues.push("map: the registry has a partition map attached (its routing follows it): pass it as `map`");
  if (options.drain && !options.registry.databases.includes(options.drain))
    issues.push(`drain: ${options.drain.name} is not a database of the registry`);
  options.moves?.forEach((mv, i) => {
    const names = options.registry.databases.map((d) => d.name);
    if (!options.registry.shards.some((s) => s.key === mv?.shard))
      issues.push(`moves[${i}].shard: ${JSON.stringify(mv?.shard)} is not a shard of the registry`);
    for (const end of ["from", "to"] as const)
      if (!names.includes(mv?.[end]))
        issues.push(`moves[${i}].${end}: ${JSON.stringify(mv?.[end])} is not a database of the registry`);
  });
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  const settings = {
    ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
    ...(options.minImprovement !== undefined ? { minImprovement: options.minImprovement } : {}),
    ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
  };
  const limit = options.maxMoves ?? (options.drain ? Number.POSITIVE_INFINITY : 4);
  // The planner's own checks of its settings (`BalanceInputError`), before any database is read.
  planBalance({}, { databases: [], shards: [] }, { ...settings, maxMoves: limit });
  return { by, windowMs, timeoutMs, settings, limit };
}

/** `runBalance` once its options are checked (and, unless a dry run, under the fleet's balance `lease`). */
async function balanceRun<Client extends ShardClient>(
  options: RunBalanceOptions<Client>,
  { by, windowMs, timeoutMs, settings, limit }: Checked,
  lease: BalanceLease | undefined,
): Promise<BalanceRun> {
  const { registry } = options;
  const allows = registry.placement.allows;
  // A shard is not planned back onto a database it left: recently (its tombstone there is younger
  // than RECENT_LEFT_MS), or in this run (no flapping on stable load).
  const plan = (m: Measurement, maxMoves: number) =>
    planBalance(m.loads, m.placement, {
      ...settings,
      maxMoves,
      allows,
      // A drain moves the drained database's shards and nothing else.
      drainOnly: options.drain !== undefined,
      recentMoves: [...m.recent, ...report.moves.map((mv) => ({ shard: mv.shard, from: mv.from }))],
    });
  const measureNow = (sizes?: Measurement["sizes"]) =>
    measure(registry, options.tables, {
      by,
      windowMs,
      timeoutMs,
      sizeTimeoutMs: options.sizeTimeoutMs ?? 60_000,
      drain: options.drain,
      sizes,
    });
  // Moves a dead balancer or mover left stopped (their lease lapsed): each taken over first and
  // made (`moveShard` finishes it, or undoes and makes it again), then the run plans from there.
  const takenOver = lease ? await takeOverStopped(options, timeoutMs) : [];
  let m = await measureNow();
  const sizes = m.sizes;
  const report: BalanceRun = {
    ok: true,
    dryRun: options.dryRun ?? false,
    drain: options.drain?.name ?? null,
    by,
    windowMs,
    problems: m.problems,
    shards: m.shards,
    plan: null,
    moves: [],
    stoppedBy: "dry-run",
    reason: "",
  };
  report.moves.push(...takenOver);
  const failed = takenOver.find((mv) => mv.status === "failed");
  if (failed)
    return drained(
      {
        ...report,
        ok: false,
        stoppedBy: "failed",
        reason: `the stopped move of ${failed.shard} to ${failed.to}, taken over, failed: ${failed.error}`,
      },
      m,
    );
  if (m.problems.length > 0) {
    return {
      ...report,
      ok: false,
      stoppedBy: "refused",
      reason: "the balance did not start: the map or the load could not be read as they should",
    };
  }
  report.plan = plan(m, limit);
  options.onEvent?.({ type: "measured", plan: report.plan });
  if (report.dryRun) return drained({ ...report, reason: `dry run: ${report.plan.reason}` }, m);
  // The moves approved, when given: made as they are, one after another, without planning again.
  const approved = options.moves ? [...options.moves] : null;
  if (approved?.length === 0) return drained({ ...report, stoppedBy: "done", reason: "no move to make" }, m);
  if (!approved && report.plan.moves.length === 0)
    return drained({ ...report, stoppedBy: report.plan.stoppedBy, reason: report.plan.reason }, m);

  const map = options.map ?? (await PartitionMap.open({ registry, tables: options.tables, timeoutMs }));
  let placed: Placed | undefined;
  const interrupted = () => `interrupted after ${plural(report.moves.length, "move")}: run it again to go on`;
  try {
    let current = report.plan;
    for (;;) {
      if (options.signal?.aborted) {
        report.stoppedBy = "interrupted";
        report.reason = interrupted();
        break;
      }
      const next = approved ? approved[0] : current.moves[0];
      if (!next) {
        report.stoppedBy = approved ? "done" : current.stoppedBy;
        report.reason = approved
          ? `the ${plural(report.moves.length, "move")} approved made`
          : current.reason;
        break;
      }
      if (options.maxP99Ms !== undefined) {
        const calm = await waitForCalm(
          registry,
          next.shard,
          { ...options, onPause: (pause) => options.onEvent?.({ type: "pause", ...pause }) },
          timeoutMs,
        );
        if (calm !== true) {
          report.stoppedBy = calm === "aborted" ? "interrupted" : "p99";
          report.reason = calm === "aborted" ? interrupted() : calm;
          break;
        }
      }
      // The fleet's lease, renewed right before the move: a run whose lease lapsed and was taken by
      // another run starts no other move.
      const lost = await lease
        ?.renew()
        .catch((error: unknown) => `it could not be renewed: ${lastLine(error)}`);
      if (lost) {
        report.ok = false;
        report.stoppedBy = "lease-lost";
        report.reason = `stopped after ${plural(report.moves.length, "move")}, before the next: this run lost the fleet's balance lease (${lost})`;
        break;
      }
      const index = report.moves.length;
      options.onEvent?.({
        type: "move",
        index,
        shard: next.shard,
        from: next.from,
        to: next.to,
        reason: next.reason,
      });
      const done = await runMove(map, next, options, (progress) =>
        options.onEvent?.({ type: "step", index, shard: next.shard, progress }),
      );
      report.moves.push(done);
      if (done.status === "failed") {
        report.ok = false;
        report.stoppedBy = "failed";
        report.reason = `the move of ${next.shard} to ${next.to} failed: ${done.error}`;
        break;
      }
      options.onEvent?.({
        type: "moved",
        index,
        shard: next.shard,
        durationMs: done.durationMs,
        freezeMs: done.freezeMs,
      });
      if (approved) {
        approved.shift();
        continue;
      }
      if (report.moves.length >= limit) {
        report.stoppedBy = "max-moves";
        report.reason = `${plural(report.moves.length, "move")} made (maxMoves): run it again to go on`;
        break;
      }
      m = await measureNow(sizes);
      if (m.problems.length > 0) {
        report.ok = false;
        report.problems = m.problems;
        report.stoppedBy = "refused";
        report.reason = `stopped after ${plural(report.moves.length, "move")}: the map or the load could not be read as they should`;
        break;
      }
      try {
        current = plan(m, limit - report.moves.length);
      } catch (error) {
        // Figures the planner refuses (`BalanceInputError`): stop, keeping the report of the moves made.
        report.ok = false;
        report.stoppedBy = "refused";
        report.reason = `stopped after ${plural(report.moves.length, "move")}: ${lastLine(error)}`;
        break;
      }
    }
    // A drain is judged by where the records place its shards once the run is over.
    if (options.drain) placed = await placedNow(map);
  } finally {
    if (!options.map) map.close();
  }
  return drained(report, m, placed);
}

/**
 * Takes over every move the records show stopped (its lease lapsed: its balancer or mover died),
 * one at a time, each made through `moveShard` to its target; stops at the first that fails.
 */
async function takeOverStopped<Client extends ShardClient>(
  options: RunBalanceOptions<Client>,
  timeoutMs: number,
): Promise<BalanceMoveDone[]> {
  const { registry } = options;
  const view = await readPartitionMap(registry, { timeoutMs });
  const stopped = view.stopped.filter((s) => registry.databases.some((d) => d.name === s.to));
  if (stopped.length === 0) return [];
  const map = options.map ?? (await PartitionMap.open({ registry, tables: options.tables, timeoutMs }));
  const done: BalanceMoveDone[] = [];
  try {
    for (const s of stopped) {
      const index = done.length;
      const reason = `a move stopped at ${s.step} by ${s.holder}, whose lease lapsed: taken over and made`;
      const next = { shard: s.shard.key, from: s.database, to: s.to, kind: "takeover" as const, reason };
      options.onEvent?.({ type: "move", index, shard: next.shard, from: next.from, to: next.to, reason });
      const move = await runMove(map, next, options, (progress) =>
        options.onEvent?.({ type: "step", index, shard: next.shard, progress }),
      );
      done.push(move);
      if (move.status === "failed") break;
      options.onEvent?.({
        type: "moved",
        index,
        shard: next.shard,
        durationMs: move.durationMs,
        freezeMs: move.freezeMs,
      });
    }
  } finally {
    if (!options.map) map.close();
  }
  return done;
}

/** Where each shard of the map's registry is (database name by shard key), or why that is unknown. */
type Placed = Map<string, string> | { unknown: string };

async function placedNow<Client extends ShardClient>(map: PartitionMap<Client>): Promise<Placed> {
  try {
    await map.refresh();
    return new Map(map.registry.shards.map((s) => [s.key, map.registry.databaseOf(s).name]));
  } catch (error) {
    return { unknown: `where the shards are now could not be read: ${lastLine(error)}` };
  }
}

/**
 * A drain is done, and its report `ok`, exactly when the database holds no shard: after a run, as
 * the records say then (`placed`); for a dry run, once its plan is made. Whatever stopped it (a
 * shard no rule lets go elsewhere, a limit, Ctrl-C, a failed move), it is not `ok` while a shard is
 * left there, naming each, so `drain && decommission` never decommissions a database that holds data.
 */
function drained(report: BalanceRun, m: Measurement, placed?: Placed): BalanceRun {
  if (report.drain === null) return report;
  if (placed && !(placed instanceof Map))
    return { ...report, ok: false, reason: `${report.reason}; the drain may not be done: ${placed.unknown}` };
  // Without a map read after the moves (a dry run, or no move made): the measurement, and the plan.
  const moved = new Map((report.dryRun ? (report.plan?.moves ?? []) : []).map((mv) => [mv.shard, mv.to]));
  const where: [string, string][] = placed
    ? [...placed]
    : m.shards.map((s) => [s.shard, moved.get(s.shard) ?? s.database]);
  const left = where.filter(([, db]) => db === report.drain).map(([shard]) => shard);
  if (left.length === 0) return { ...report, ok: true };
  const skipped = report.plan?.skipped.filter((s) => left.includes(s.shard)) ?? [];
  return {
    ...report,
    ok: false,
    reason: `${report.reason}; the drain is not done: ${report.drain} still holds ${left.join(", ")}${
      skipped.length > 0 ? ` (${skipped.map((s) => `${s.shard}: ${s.reason}`).join("; ")})` : ""
    }`,
  };
}

/** Runs one planned move through `moveShard`; a failure is reported, not thrown. */
async function runMove<Client extends ShardClient>(
  map: PartitionMap<Client>,
  next: Pick<BalanceMove, "shard" | "from" | "to" | "reason"> & { kind: BalanceMoveDone["kind"] },
  options: RunBalanceOptions<Client>,
  onProgress: (progress: MoveProgress) => void,
): Promise<BalanceMoveDone> {
  const { registry } = options;
  const mode = options.mode ?? "live";
  const to = registry.databases.find((d) => d.name === next.to)!;
  const shard = registry.shards.find((s) => s.key === next.shard)!;
  const started = Date.now();
  const base = { shard: next.shard, from: next.from, to: next.to, kind: next.kind, reason: next.reason };
  try {
    // The plan was made from what the records said then; another mover (a second balance, a person)
    // may have moved the shard since: move it only from where the plan has it.
    await map.refresh();
    const from = registry.databaseOf(shard);
    // A stopped move taken over: wherever the records have it (its source, or its target once switched).
    if (from.name !== next.from && next.kind !== "takeover")
      return {
        ...base,
        status: "failed",
        durationMs: Date.now() - started,
        freezeMs: 0,
        epoch: null,
        error: `shard ${next.shard} is on ${from.name} now, not on ${next.from} as planned (another mover moved it): nothing was changed`,
      };
    const source = registry.databases.find((d) => d.name === next.from) ?? from;
    const result = await moveShard({
      map,
      shard,
      to,
      mode,
      ...(mode === "live" ? { sourceConnection: options.sourceConnection!(source) } : {}),
      ...(options.verify !== undefined ? { verify: options.verify } : {}),
      ...(options.cleanup !== undefined ? { cleanup: options.cleanup } : {}),
      ...(options.copyTimeoutMs !== undefined ? { copyTimeoutMs: options.copyTimeoutMs } : {}),
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(options.freezeBudgetMs !== undefined ? { freezeBudgetMs: options.freezeBudgetMs } : {}),
      onProgress,
    });
    return {
      ...base,
      from: result.from,
      status: "moved",
      durationMs: result.durationMs,
      freezeMs: result.freezeMs,
      epoch: result.epoch,
    };
  } catch (error) {
    return {
      ...base,
      status: "failed",
      durationMs: Date.now() - started,
      freezeMs: 0,
      epoch: null,
      error: lastLine(error),
      ...((error as { left?: unknown })?.left === "half-done" ? { halfDone: true } : {}),
    };
  }
}
