// `shardkit balance` and `shardkit drain`: `runBalance` of `@shardkit/ownership` over the CLI's
// configuration (its load measured from the windows routers flush, its plan, its moves one at a
// time), and the report for people.
import {
  type BalanceEvent,
  type BalanceMoveDone,
  type BalanceRun,
  type LoadMeasure,
  type MeasuredShard,
  runBalance,
} from "@shardkit/ownership";
import { type ConfigOptions, findDatabase, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { duration, bytes as formatBytes, plural, table } from "./format.js";
import { parseTables } from "./move.js";

export type { BalanceEvent, BalanceMoveDone, LoadMeasure, MeasuredShard };

export interface BalanceCommandOptions extends ConfigOptions {
  /** Every table of the app holding shard rows, as for `move` (`Table`, `Table:column`, `Table:column:bits`). */
  tables: readonly string[];
  /** `drain`: every shard leaves this database (URL, printed name or database name). */
  drain?: string;
  /** Measure and print the plan; change nothing. */
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
  /** Before each move, wait while another shard's p99 over the last minute is above this (ms). */
  maxP99Ms?: number;
  /** How long one such wait may last before the balance stops. Default 300000. */
  maxPauseMs?: number;
  /** As `move`: live (default) or offline. Live moves' targets reach each source by its configured URL. */
  mode?: "live" | "offline";
  verify?: boolean;
  cleanup?: boolean;
  /** How long each database may take to answer a read (the map, the load). Default 10 s. */
  timeoutMs?: number;
  copyTimeoutMs?: number;
  leaseMs?: number;
  maxFreezeMs?: number;
  /** Aborted (Ctrl-C): the move under way ends (moved, or undone), no other starts. */
  signal?: AbortSignal;
  onEvent?: (event: BalanceEvent) => void;
}

/** What `balance` (or `drain`) did: `runBalance`'s report. */
export type BalanceReport = BalanceRun;

/**
 * Measures the load of each logical shard, plans, and runs the plan one move at a time (see
 * `runBalance` of `@shardkit/ownership`), over the configuration. `dryRun` only reads.
 */
export async function balance(options: BalanceCommandOptions): Promise<BalanceReport> {
  const issues: string[] = [];
  for (const [name, value] of [
    ["--window", options.windowMs],
    ["--timeout", options.timeoutMs],
    ["--copy-timeout", options.copyTimeoutMs],
    ["--lease", options.leaseMs],
    ["--max-freeze", options.maxFreezeMs],
    ["--max-p99", options.maxP99Ms],
    ["--max-pause", options.maxPauseMs],
  ] as const)
    if (value !== undefined && !(Number.isFinite(value) && value > 0))
      issues.push(`${name}: expected a positive number of ms, got ${value}`);
  let tables: ReturnType<typeof parseTables> = [];
  try {
    tables = parseTables(options.tables);
  } catch (error) {
    issues.push(...(error as UsageError).issues);
  }
  if (issues.length > 0) throw new UsageError(issues);
  const opened = openConfig(options);
  try {
    const drain = options.drain !== undefined ? findDatabase(opened, options.drain) : undefined;
    return await runBalance({
      registry: opened.registry,
      tables,
      ...(drain ? { drain } : {}),
      sourceConnection: (source) => opened.urlOf(source),
      ...(options.dryRun !== undefined ? { dryRun: options.dryRun } : {}),
      ...(options.windowMs !== undefined ? { windowMs: options.windowMs } : {}),
      ...(options.by !== undefined ? { by: options.by } : {}),
      ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
      ...(options.minImprovement !== undefined ? { minImprovement: options.minImprovement } : {}),
      ...(options.maxMoves !== undefined ? { maxMoves: options.maxMoves } : {}),
      ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
      ...(options.maxP99Ms !== undefined ? { maxP99Ms: options.maxP99Ms } : {}),
      ...(options.maxPauseMs !== undefined ? { maxPauseMs: options.maxPauseMs } : {}),
      ...(options.mode !== undefined ? { mode: options.mode } : {}),
      ...(options.verify !== undefined ? { verify: options.verify } : {}),
      ...(options.cleanup !== undefined ? { cleanup: options.cleanup } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.copyTimeoutMs !== undefined ? { copyTimeoutMs: options.copyTimeoutMs } : {}),
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(options.maxFreezeMs !== undefined ? { freezeBudgetMs: options.maxFreezeMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    });
  } finally {
    await opened.close();
  }
}

/** A progress line's text for a balance event. */
export function describeBalanceEvent(event: BalanceEvent): string {
  switch (event.type) {
    case "measured":
      return `measured: ${event.plan.reason}`;
    case "move":
      return `move ${event.shard}: ${event.from} -> ${event.to} (${event.reason})`;
    case "step":
      return `move ${event.shard}: ${event.progress.step} (${duration(event.progress.elapsedMs)})`;
    case "moved":
      return `moved ${event.shard} in ${duration(event.durationMs)}, writes held ${duration(event.freezeMs)}`;
    case "pause":
      return `paused: shard ${event.shard}'s p99 is ${event.p99Ms.toFixed(1)} ms (above ${event.boundMs} ms), waited ${duration(event.waitedMs)}`;
  }
}

const rate = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 1 ? n.toFixed(1) : n.toFixed(3));

/** `balance` for people: the databases before and after, the plan's moves, hot shards, and what ran. */
export function renderBalance(report: BalanceReport): string {
  const lines: string[] = [];
  const unit = report.by === "time" ? "db ms/s" : report.by === "calls" ? "calls/s" : "writes/s";
  if (report.problems.length > 0) {
    lines.push(`${plural(report.problems.length, "problem")}:`);
    for (const p of report.problems) lines.push(`  - ${p}`);
  }
  const plan = report.plan;
  if (plan) {
    const after = new Map(plan.after.databases.map((d) => [d.name, d]));
    lines.push(
      table(
        [
          "DATABASE",
          { header: "SHARDS", align: "right" },
          { header: `LOAD (${unit})`, align: "right" },
          { header: "OF MEAN", align: "right" },
          { header: "AFTER", align: "right" },
          { header: "SIZE", align: "right" },
        ],
        plan.before.databases.map((d) => [
          `${d.name}${d.draining ? " (draining)" : ""}`,
          d.shards,
          rate(d.load),
          `${d.ratio.toFixed(2)}x`,
          `${(after.get(d.name)?.ratio ?? 0).toFixed(2)}x`,
          formatBytes(d.bytes),
        ]),
      ),
    );
    if (plan.moves.length > 0)
      lines.push(
        table(
          [
            "SHARD",
            "FROM",
            "TO",
            { header: "LOAD", align: "right" },
            { header: "SIZE", align: "right" },
            "WHY",
          ],
          plan.moves.map((mv) => [mv.shard, mv.from, mv.to, rate(mv.load), formatBytes(mv.bytes), mv.reason]),
        ),
      );
    for (const h of plan.hot) {
      lines.push(`hot: shard ${h.shard} on ${h.database} (${rate(h.load)} ${unit}): ${h.reason}`);
      // Which keys make it hot: each one's share of the shard's calls (a heavy hitter's count may
      // exceed its true count by its error).
      const shard = report.shards.find((s) => s.shard === h.shard);
      for (const k of shard?.top.slice(0, 3) ?? [])
        if (shard && shard.calls > 0)
          lines.push(`  key ${k.key}: ${Math.round((100 * k.count) / shard.calls)}% of its calls`);
    }
    for (const s of plan.skipped) lines.push(`skipped: shard ${s.shard}: ${s.reason}`);
    lines.push(
      `plan: ${plural(plan.moves.length, "move")}, max/mean ${plan.before.ratio.toFixed(2)}x -> ${plan.after.ratio.toFixed(2)}x`,
    );
  }
  for (const mv of report.moves)
    lines.push(
      mv.status === "moved"
        ? `moved ${mv.shard}: ${mv.from} -> ${mv.to}, epoch ${mv.epoch}, writes held ${duration(mv.freezeMs)}, ${duration(mv.durationMs)}`
        : `failed ${mv.shard}: ${mv.from} -> ${mv.to}: ${mv.error}${mv.halfDone ? " (left half-done: run the balance again to finish or undo it)" : ""}`,
    );
  lines.push(report.reason);
  return `${lines.join("\n")}\n`;
}
