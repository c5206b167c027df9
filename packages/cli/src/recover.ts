// `shardkit recover`: concludes the atomic actions left in doubt on every database of the
// configuration (`$action(fn, { atomic: true })` whose coordinator died): commit where the deciding
// database recorded commit, roll back where nothing was recorded and the coordinator's lease lapsed,
// leave (and name) those still within it. Then reads again what is left, which decides the exit code.
import { type ConfigOptions, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { alignRight, duration, plural, table } from "./format.js";
import { type InDoubtEntry, type InDoubtReport, readInDoubt } from "./in-doubt.js";

export interface RecoverOptions extends ConfigOptions {
  /** The coordinators' lease: prepared transactions younger than this are left. Default 10 s. */
  leaseMs?: number;
  /** How long each database may take to answer each question. Default 5000 ms. */
  timeoutMs?: number;
  /** List what it would do; change nothing. */
  dryRun?: boolean;
  /** Each prepared transaction as it is handled (not with `dryRun`). */
  onProgress?: (event: { found: number; done: number; entry?: InDoubtEntry }) => void;
}

export interface RecoverReport {
  /** Nothing is left in doubt and every database answered (exit code 0). */
  ok: boolean;
  /**
   * 0: nothing in doubt is left (with `dryRun`: none was found). 4: prepared transactions are left
   * that a later run concludes (within their coordinator's lease; with `dryRun`: any it found). 1: a
   * database did not answer, or one is left that recovery cannot conclude from this configuration.
   */
  exitCode: 0 | 1 | 4;
  config: string;
  dryRun: boolean;
  leaseMs: number;
  /** Every prepared transaction found, with what recovery does (and, without `dryRun`, did). */
  transactions: InDoubtEntry[];
  committed: number;
  rolledBack: number;
  /** What is in doubt after the run (with `dryRun`: what was found), per database. */
  remaining: InDoubtReport;
  /** Databases that did not answer. */
  unanswered: { database: string; error: string }[];
}

/** Concludes (or, with `dryRun`, lists) the atomic actions in doubt on every database of the configuration. */
export async function recover(options: RecoverOptions = {}): Promise<RecoverReport> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const leaseMs = options.leaseMs ?? 10_000;
  const issues: string[] = [];
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
    issues.push(`--timeout: expected a positive number of ms, got ${timeoutMs}`);
  if (!(Number.isInteger(leaseMs) && leaseMs >= 0))
    issues.push(`--lease: expected a number of ms >= 0, got ${leaseMs}`);
  if (issues.length > 0) throw new UsageError(issues);
  const opened = openConfig({ ...options, connectTimeoutMs: timeoutMs });
  const dryRun = options.dryRun ?? false;
  try {
    const databases = opened.registry.databases;
    const first = await readInDoubt(databases, {
      leaseMs,
      timeoutMs,
      dryRun,
      ...(options.onProgress && !dryRun ? { onProgress: options.onProgress } : {}),
    });
    const remaining = dryRun ? first : await readInDoubt(databases, { leaseMs, timeoutMs, dryRun: true });
    const unanswered = [...first.unanswered, ...remaining.unanswered].filter(
      (u, i, all) => all.findIndex((v) => v.database === u.database) === i,
    );
    const undecidable = remaining.transactions.some((t) => t.decision === "unknown");
    const exitCode = unanswered.length > 0 || undecidable ? 1 : remaining.transactions.length > 0 ? 4 : 0;
    return {
      ok: exitCode === 0,
      exitCode,
      config: opened.source,
      dryRun,
      leaseMs,
      transactions: first.transactions,
      committed: first.transactions.filter((t) => t.outcome === "committed").length,
      rolledBack: first.transactions.filter((t) => t.outcome === "rolled-back").length,
      remaining,
      unanswered,
    };
  } finally {
    await opened.close();
  }
}

/** How a handled transaction reads in progress lines and the report. */
export function describeRecovered(t: InDoubtEntry): string {
  const did =
    t.outcome === "committed"
      ? "committed"
      : t.outcome === "rolled-back"
        ? "rolled back"
        : t.outcome === "left"
          ? "left"
          : `would ${t.plan}`;
  return `${did} ${t.gid} on ${t.database} (${t.why})`;
}

/** `recover` for people. */
export function renderRecover(report: RecoverReport): string {
  const lines: string[] = [];
  const found = report.transactions;
  if (found.length === 0 && report.unanswered.length === 0) {
    return `no atomic action in doubt on the databases of ${report.config}\n`;
  }
  lines.push(
    `${plural(found.length, "prepared transaction")} of atomic actions found (configuration: ${report.config}; lease ${duration(report.leaseMs)})`,
  );
  if (found.length > 0)
    lines.push(
      table(
        [
          "DATABASE",
          "ACTION",
          "SHARDS",
          alignRight("AGE"),
          "DECISION",
          report.dryRun ? "WOULD" : "DID",
          "WHY",
        ],
        found.map((t) => [
          t.database,
          t.action,
          t.shards.join(","),
          duration(t.ageMs),
          t.decision,
          report.dryRun ? t.plan : t.outcome === "rolled-back" ? "rolled back" : t.outcome,
          t.why,
        ]),
      ),
    );
  if (!report.dryRun)
    lines.push(
      "",
      `committed ${report.committed}, rolled back ${report.rolledBack}; ${plural(report.remaining.transactions.length, "prepared transaction")} left in doubt`,
    );
  const left = report.remaining.transactions;
  if (!report.dryRun && left.length > 0)
    lines.push(...left.map((t) => `  left: ${t.gid} on ${t.database}: ${t.why}`));
  if (report.exitCode === 4)
    lines.push(
      report.dryRun
        ? "run `shardkit recover` to conclude those past the lease"
        : "run `shardkit recover` again once the lease has lapsed",
    );
  if (report.unanswered.length > 0)
    lines.push(
      "",
      `${plural(report.unanswered.length, "database")} did not answer (their prepared transactions were not seen):`,
      ...report.unanswered.map((u) => `  ${u.database}: ${u.error}`),
    );
  return `${lines.join("\n")}\n`;
}
