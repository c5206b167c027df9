// `shardkit balance` and `shardkit drain`: `runBalance` of `@shardkit/ownership` over the CLI's
// configuration (its load measured from the windows routers flush, its plan, its moves one at a
// time), and the report for people.
import {
  type BalanceEvent,
  type BalanceMoveDone,
  type BalanceRun,
  type LoadMeasure,
  type MeasuredShard,
  type RunBalanceOptions,
  runBalance,
} from "@shardkit/ownership";
import { LOAD_UNITS } from "@shardkit/prisma";
import { type ConfigOptions, findDatabase, openConfig, type RawClient } from "./config.js";
import { alignRight, duration, bytes as formatBytes, plural, table } from "./format.js";
import { parseTables } from "./move.js";

export type { BalanceEvent, BalanceMoveDone, LoadMeasure, MeasuredShard };

/**
 * `runBalance`'s options (see `RunBalanceOptions` of `@shardkit/ownership`), over the CLI's
 * configuration: tables as `move` takes them, the database to drain by name, and live moves'
 * targets reach each source by its configured URL.
 */
export interface BalanceCommandOptions
  extends ConfigOptions,
    Omit<
      RunBalanceOptions<RawClient>,
      "registry" | "map" | "tables" | "drain" | "sourceConnection" | "freezeBudgetMs"
    > {
  /** Every table of the app holding shard rows, as for `move` (`Table`, `Table:column`, `Table:column:bits`). */
  tables: readonly string[];
  /** `drain`: every shard leaves this database (URL, printed name or database name). */
  drain?: string;
  /** As `move`: how long the shard's writes may wait, fence to switch (`freezeBudgetMs`). */
  maxFreezeMs?: number;
}

/** What `balance` (or `drain`) did: `runBalance`'s report. */
export type BalanceReport = BalanceRun;

/**
 * Measures the load of each logical shard, plans, and runs the plan one move at a time (see
 * `runBalance` of `@shardkit/ownership`), over the configuration. `dryRun` only reads.
 */
export async function balance(options: BalanceCommandOptions): Promise<BalanceReport> {
  const {
    config: _config,
    env: _env,
    cwd: _cwd,
    tables: specs,
    drain: name,
    maxFreezeMs,
    ...settings
  } = options;
  const tables = parseTables(specs);
  const opened = openConfig(options);
  try {
    const drain = name !== undefined ? findDatabase(opened, name) : undefined;
    return await runBalance({
      ...settings,
      registry: opened.registry,
      tables,
      ...(drain ? { drain } : {}),
      ...(maxFreezeMs !== undefined ? { freezeBudgetMs: maxFreezeMs } : {}),
      sourceConnection: (source) => opened.urlOf(source),
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
      return `paused ${duration(event.waitedMs)}: ${event.why}`;
  }
}

const rate = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 1 ? n.toFixed(1) : n.toFixed(3));

/** `balance` for people: the databases before and after, the plan's moves, hot shards, and what ran. */
export function renderBalance(report: BalanceReport): string {
  const lines: string[] = [];
  const unit = LOAD_UNITS[report.by];
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
          alignRight("SHARDS"),
          alignRight(`LOAD (${unit})`),
          alignRight("OF MEAN"),
          alignRight("AFTER"),
          alignRight("SIZE"),
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
          ["SHARD", "FROM", "TO", alignRight("LOAD"), alignRight("SIZE"), "WHY"],
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
        : `failed ${mv.shard}: ${mv.from} -> ${mv.to}: ${mv.error}${mv.halfDone ? ` (left half-done: \`shardkit move ${mv.shard} --to ${mv.to}\` finishes or undoes it)` : ""}`,
    );
  lines.push(report.reason);
  return `${lines.join("\n")}\n`;
}
