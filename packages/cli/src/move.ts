import { ShardIdentifier } from "@shardkit/id";
import {
  checkMove,
  type FencedTable,
  type MoveCheck,
  type MoveProgress,
  type MoveResult,
  moveShard,
  PartitionMap,
} from "@shardkit/ownership";
import { type ConfigOptions, findDatabase, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { positiveMsIssues } from "./flags.js";
import { alignRight, bytes, count, duration, plural, redactUrl, table } from "./format.js";

export interface MoveCommandOptions extends ConfigOptions {
  /** The logical shard, `group/member`. */
  shard: string;
  /** The database that will own it: its URL, its printed name, or its database name when unique. */
  to: string;
  /**
   * Every table of the app holding shard rows: `Table` (column `id`, a ShardedUUID), `Table:column`,
   * or `Table:column:bits`. @shardkit/prisma's own tables the databases have are added (`SHARDKIT_TABLES`).
   */
  tables: readonly string[];
  /** `live` (default; the source needs `wal_level = logical`) or `offline` (fence first, then copy). */
  mode?: "live" | "offline";
  /** For a live move: how the target's server reaches the source (libpq URL). Default: the source's URL in the configuration. */
  sourceConnection?: string;
  /** Compare counts and checksums before the switch. Default true. */
  verify?: boolean;
  /** Delete the old copy after the switch. Default true. */
  cleanup?: boolean;
  /**
   * How long each database may take to answer (the map, the records of moves, the checks). One that
   * takes longer is named in the error and nothing is changed; a dry run lists it. Default 10 s.
   */
  timeoutMs?: number;
  /** A live move's copy and catch-up: how long they may take before the move is undone. Default 120 s. */
  copyTimeoutMs?: number;
  /** The move's lease (ms): a mover that dies holds the shard at most this long. Default 10 s. */
  leaseMs?: number;
  /**
   * How long the shard's writes may wait, fence to switch, before the move is undone; a mover stuck
   * inside its fence holds them no longer. Default 10 s (live), the copy timeout (offline).
   */
  maxFreezeMs?: number;
  /** Check the arguments, run the move's precheck and show the plan; change nothing. */
  dryRun?: boolean;
  onProgress?: (progress: MoveProgress) => void;
}

/** What `move --dry-run` would do. */
export interface MovePlan {
  dryRun: true;
  shard: string;
  /** The current owner, by the ownership records (or the configuration when none has a record); null when unknown. */
  from: string | null;
  to: string;
  epoch: number | null;
  state: string;
  mode: "live" | "offline";
  tables: FencedTable[];
  /** The source connection the target's server would use (password hidden). */
  sourceConnection: string | null;
  /**
   * What would stop the move from starting (`checkMove` of `@shardkit/ownership`: the move's own
   * precheck, records that cannot be right, a database that did not answer); empty: it can start.
   */
  issues: string[];
  /**
   * A move of the shard that stopped half-way, which the move finishes (it had switched) or undoes
   * (it had not) before anything else; null when there is none.
   */
  resume: MoveCheck["resume"];
}

export type MoveReport = MovePlan | (MoveResult & { dryRun: false });

/** Whether a move's report is good news: a move done, or a plan whose precheck found nothing (exit code 0; else 1). */
export function moveOk(report: MoveReport): boolean {
  return !report.dryRun || report.issues.length === 0;
}

/** `Table`, `Table:column` or `Table:column:bits` (comma-separated lists too). */
export function parseTables(specs: readonly string[]): FencedTable[] {
  const issues: string[] = [];
  const tables: FencedTable[] = [];
  for (const spec of specs.flatMap((s) => s.split(",")).map((s) => s.trim())) {
    if (spec === "") continue;
    const [name, column = "id", kind = "uuid", ...rest] = spec.split(":");
    if (!name || !column || rest.length > 0 || (kind !== "uuid" && kind !== "bits")) {
      issues.push(
        `--table ${JSON.stringify(spec)}: expected Table, Table:column or Table:column:bits (kind uuid or bits)`,
      );
      continue;
    }
    if (tables.some((t) => t.table === name)) issues.push(`--table ${name}: listed twice`);
    tables.push(kind === "bits" ? { table: name, column, kind } : { table: name, column });
  }
  if (tables.length === 0 && issues.length === 0)
    issues.push(
      "--table: list every table of yours holding shard rows, e.g. --table Wallet --table Transfer (@shardkit/prisma's own tables are added)",
    );
  if (issues.length > 0) throw new UsageError(issues);
  return tables;
}

/**
 * Moves one logical shard to another database with `moveShard` of `@shardkit/ownership`: live
 * (logical replication, writes held only from the fence to the switch) or offline. The mover opens
 * its own partition map over the configuration. A move that stopped half-way is finished or undone
 * first (ownership records it on the source). `dryRun` only reads and returns the plan.
 */
export async function move(options: MoveCommandOptions): Promise<MoveReport> {
  const issues: string[] = [];
  let shard: ShardIdentifier | undefined;
  try {
    shard = ShardIdentifier.parse(options.shard);
  } catch (error) {
    issues.push(`shard ${JSON.stringify(options.shard)}: ${(error as Error).message}`);
  }
  const mode = options.mode ?? "live";
  if (mode !== "live" && mode !== "offline")
    issues.push(`--mode: expected live or offline, got ${JSON.stringify(mode)}`);
  issues.push(
    ...positiveMsIssues([
      ["--timeout", options.timeoutMs],
      ["--copy-timeout", options.copyTimeoutMs],
      ["--lease", options.leaseMs],
      ["--max-freeze", options.maxFreezeMs],
    ]),
  );
  const timeoutMs = options.timeoutMs ?? 10_000;
  let tables: FencedTable[] = [];
  try {
    tables = parseTables(options.tables);
  } catch (error) {
    issues.push(...(error as UsageError).issues);
  }
  if (issues.length > 0 || !shard) throw new UsageError(issues);
  const opened = openConfig(options);
  try {
    const { registry } = opened;
    if (!registry.has(shard))
      throw new UsageError([
        `shard ${shard.key} is not in the configuration (it has ${registry.shards.map((s) => s.key).join(", ")})`,
      ]);
    const to = findDatabase(opened, options.to);
    if (options.dryRun) {
      // The move's own precheck, on a read of the map (SELECTs only): what `moveShard` would refuse;
      // with the configuration's URLs, one that reaches a transaction-mode pooler is named.
      const connection = opened.urlOf;
      const check = await checkMove({ registry, shard, to, mode, tables, timeoutMs, connection });
      const { owner, from } = check;
      return {
        dryRun: true,
        shard: shard.key,
        from: from?.name ?? null,
        to: to.name,
        epoch: owner.epoch,
        state: owner.state,
        mode,
        // What the move would carry: the tables given, and @shardkit/prisma's own that the databases have.
        tables: [...check.tables],
        sourceConnection:
          mode === "live" && (options.sourceConnection !== undefined || from !== null)
            ? redactUrl(options.sourceConnection ?? opened.urlOf(from!))
            : null,
        issues: check.issues,
        resume: check.resume,
      };
    }
    // The same wait for every database as the dry run's: a slow answer is never taken for no records.
    const map = await PartitionMap.open({ registry, tables, timeoutMs });
    try {
      const from = registry.databaseOf(shard);
      const result = await moveShard({
        map,
        shard,
        to,
        mode,
        ...(mode === "live" ? { sourceConnection: options.sourceConnection ?? opened.urlOf(from) } : {}),
        ...(options.verify !== undefined ? { verify: options.verify } : {}),
        ...(options.cleanup !== undefined ? { cleanup: options.cleanup } : {}),
        ...(options.copyTimeoutMs !== undefined ? { copyTimeoutMs: options.copyTimeoutMs } : {}),
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
        ...(options.maxFreezeMs !== undefined ? { freezeBudgetMs: options.maxFreezeMs } : {}),
        onProgress: options.onProgress ?? (() => {}),
      });
      return { dryRun: false, ...result };
    } finally {
      map.close();
    }
  } finally {
    await opened.close();
  }
}

/** One progress line's text for a move's progress event. */
export function describeMoveProgress(p: MoveProgress): string {
  const extra =
    p.rows !== undefined
      ? `: ${count(p.rows)} rows ${p.step === "verify" || p.step === "verify-changes" ? "checked" : "at the target"}`
      : p.lagBytes !== undefined
        ? `: ${bytes(p.lagBytes)} behind`
        : "";
  return `${p.step}${extra} (${duration(p.elapsedMs)})`;
}

/** `move` for people. */
export function renderMove(report: MoveReport): string {
  if (report.dryRun) {
    return `${[
      `dry run: nothing was changed`,
      `shard        ${report.shard} (${report.state}${report.epoch !== null ? ` at epoch ${report.epoch}` : ""})`,
      `from         ${report.from ?? "unknown (its owner did not answer)"}`,
      `to           ${report.to}`,
      `mode         ${report.mode}${report.mode === "live" ? ` (the target's server subscribes with ${report.sourceConnection})` : ""}`,
      `tables       ${report.tables.map((t) => `${t.table}.${t.column}${t.kind === "bits" ? " (bits)" : ""}`).join(", ")}`,
      ...(report.resume
        ? [
            `resume       a move to ${report.resume.target} by ${report.resume.holder || "an earlier version"} stopped (${report.resume.step}; its lease lapsed): it is taken over and ${report.resume.action === "finish" ? "finished (it had switched)" : "undone (it had not switched)"} first`,
          ]
        : []),
      report.issues.length === 0
        ? "precheck     ok: the move can start"
        : `precheck     ${plural(report.issues.length, "problem")}: the move would not start\n${report.issues.map((i) => `  - ${i}`).join("\n")}`,
    ].join("\n")}\n`;
  }
  const lines = [
    `moved shard ${report.shard}: ${report.from} -> ${report.to}, epoch ${report.epoch} (${report.mode})`,
    `writes held ${duration(report.freezeMs)} (fence to switch), ${duration(report.durationMs)} in all${report.resumed ? `; a stopped move was ${report.resumed} first` : ""}`,
  ];
  const rows = Object.entries(report.rows);
  if (rows.length > 0)
    lines.push(
      table(
        ["TABLE", alignRight("ROWS")],
        rows.map(([t, n]) => [t, count(n)]),
      ),
    );
  return `${lines.join("\n")}\n`;
}
