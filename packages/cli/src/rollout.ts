import { PrismaPg } from "@prisma/adapter-pg";
import { isShardkitError } from "@shardkit/prisma";
import { type RolloutEvent, type RolloutReport, rolloutSchema } from "@shardkit/prisma/rollout";
import { type ConfigOptions, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { alignRight, duration, plural, table } from "./format.js";

export interface RolloutCommandOptions extends ConfigOptions {
  /** A `schema.prisma` file or a folder of `.prisma` files: push it (like `prisma db push`). */
  schema?: string;
  /** A migrations folder (with `migration_lock.toml`): apply it (like `prisma migrate deploy`). */
  migrations?: string;
  /** Push even when it would lose data. Default false. */
  acceptDataLoss?: boolean;
  /**
   * How many databases the schema engine works on at once. Default 1: one after another in the
   * configuration's order. Above 1, progress events of different databases interleave (each names
   * its database and keeps its index); the report keeps the configuration's order.
   */
  concurrency?: number;
  /** Each database as it starts and ends. */
  onProgress?: (event: RolloutEvent) => void;
}

export type { RolloutEvent, RolloutReport };

/**
 * The schema (or migrations) to every database of the configuration, spare databases included,
 * in the configuration's order (`concurrency` at a time, default one), through `rolloutSchema` of
 * `@shardkit/prisma`: the schema engine compares every database with the schema (no fingerprint
 * shortcut: this is how a database changed by hand is repaired), and each records the fingerprint
 * an open then checks. Resolves with the report whether it succeeded or stopped at a failure
 * (`ok: false`, databases not started yet `skipped`).
 */
export async function rollout(options: RolloutCommandOptions): Promise<RolloutReport> {
  if (!options.schema === !options.migrations) {
    throw new UsageError([
      options.schema
        ? "give --schema or --migrations, not both"
        : "give --schema <schema.prisma> (push) or --migrations <folder> (migrate)",
    ]);
  }
  const opened = openConfig(options);
  try {
    const targets = opened.registry.databases.map((physical) => ({
      name: physical.name,
      shards: physical.shards,
      adapter: new PrismaPg({
        connectionString: opened.urlOf(physical),
        max: 2,
        connectionTimeoutMillis: 5000,
      }),
    }));
    try {
      return await rolloutSchema({
        targets,
        ...(options.schema ? { schema: options.schema, mode: "push" as const } : {}),
        ...(options.migrations ? { migrations: options.migrations, mode: "migrate" as const } : {}),
        acceptDataLoss: options.acceptDataLoss ?? false,
        ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
        onProgress: options.onProgress ?? (() => {}),
      });
    } catch (error) {
      if (isShardkitError(error, "ROLLOUT_FAILED")) return error.report;
      throw error;
    }
  } finally {
    await opened.close();
  }
}

/** One progress line's text for a rollout event. */
export function describeRolloutEvent(event: RolloutEvent): string {
  if (event.type === "start") return `${event.target}: rolling out`;
  const r = event.report;
  const what =
    r.appliedMigrations.length > 0
      ? `${plural(r.appliedMigrations.length, "migration")}`
      : plural(r.changes, "change");
  return `${event.target}: ${r.status}${r.status === "applied" ? ` (${what})` : ""}, ${duration(r.durationMs)}${r.error ? `: ${r.error}` : ""}`;
}

/** `rollout` for people. */
export function renderRollout(report: RolloutReport): string {
  const lines = [
    table(
      ["DATABASE", "SHARDS", "STATUS", alignRight("CHANGES"), alignRight("TIME")],
      report.targets.map((t) => [
        t.name,
        t.shards.join(",") || "(spare)",
        t.status,
        report.mode === "migrate" ? t.appliedMigrations.length : t.changes,
        duration(t.durationMs),
      ]),
    ),
  ];
  for (const t of report.targets) {
    for (const warning of t.warnings) lines.push(`warning: ${t.name}: ${warning}`);
    if (t.error) lines.push(`failed: ${t.name}: ${t.error}`);
  }
  const applied = report.targets.filter((t) => t.status === "applied").length;
  const unchanged = report.targets.filter((t) => t.status === "unchanged").length;
  lines.push(
    report.ok
      ? `${report.mode}: ${applied} applied, ${unchanged} unchanged, ${plural(report.targets.length, "database")}`
      : `${report.mode} stopped at a failure: later databases were skipped; rerun when it is fixed (databases already done report unchanged)`,
  );
  return `${lines.join("\n")}\n`;
}
