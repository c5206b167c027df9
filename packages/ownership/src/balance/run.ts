// A balance run: measure each logical shard's load (the windows routers flush to
// `shardkit."ShardLoad"`) and size, plan with `planBalance`, and run the plan one move at a time
// through `moveShard`, measuring again between moves. `shardkit balance` and `shardkit drain` are
// this over the CLI's configuration; an app or a test runs it over its own registry (PGlite too).
import type { ShardClient } from "@shardkit/prisma";
import { OwnershipOptionsError } from "../errors.js";
import { DEFAULT_LEASE_MS } from "../lease-take.js";
import { PartitionMap } from "../map.js";
import { lastLine } from "../raw.js";
import { BalanceLease } from "./lease.js";
import { type LoadMeasure, type MeasuredShard, type Measurement, measure } from "./measure.js";
import { planBalance } from "./plan.js";
import {
  beforeMove,
  drained,
  type Placed,
  placedNow,
  plural,
  runMove,
  takeOverStopped,
} from "./run-steps.js";
import type { BalanceEvent, BalanceMoveDone, BalanceRun, RunBalanceOptions } from "./run-types.js";

export type { BalanceEvent, BalanceMoveDone, BalanceRun, LoadMeasure, MeasuredShard, RunBalanceOptions };

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

/**
 * `runBalance` once its options are checked (and, unless a dry run, under the fleet's balance `lease`).
 * Longer than 80 lines: the run's steps (lease, takeover, measure, plan, moves) in their order.
 */
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
    planBalance(m.loads, m.fleet, {
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
  // finished or undone (`takeOverStopped`), counted against maxMoves; then the run plans from there.
  const takeover = lease ? await takeOverStopped(options, lease, limit, timeoutMs) : { moves: [] };
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
    moves: [...takeover.moves],
    stoppedBy: "dry-run",
    reason: "",
  };
  if (takeover.stop)
    return drained(
      {
        ...report,
        ok: takeover.stop.stoppedBy !== "failed" && takeover.stop.stoppedBy !== "lease-lost",
        ...takeover.stop,
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
  report.plan = plan(m, limit - takeover.moves.length);
  options.onEvent?.({ type: "measured", plan: report.plan });
  if (report.dryRun) return drained({ ...report, reason: `dry run: ${report.plan.reason}` }, m);
  // The moves approved, when given: made as they are, one after another, without planning again.
  const approved = options.moves ? [...options.moves] : null;
  if (approved?.length === 0) return drained({ ...report, stoppedBy: "done", reason: "no move to make" }, m);
  if (!approved && report.plan.moves.length === 0)
    return drained({ ...report, stoppedBy: report.plan.stoppedBy, reason: report.plan.reason }, m);

  const map = options.map ?? (await PartitionMap.open({ registry, tables: options.tables, timeoutMs }));
  let placed: Placed | undefined;
  try {
    let current = report.plan;
    for (;;) {
      const next = approved ? approved[0] : current.moves[0];
      if (!next) {
        report.stoppedBy = approved ? "done" : current.stoppedBy;
        report.reason = approved
          ? `the ${plural(report.moves.length, "move")} approved made`
          : current.reason;
        break;
      }
      const stop = await beforeMove(options, lease, next.shard, report.moves.length, timeoutMs);
      if (stop) {
        if (stop.stoppedBy === "lease-lost") report.ok = false;
        Object.assign(report, stop);
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
