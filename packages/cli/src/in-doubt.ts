// Atomic actions in doubt: the prepared transactions of `$action(fn, { atomic: true })` that are on the
// databases of a configuration, what their deciding database says, and what `shardkit recover` does
// with each. One read for `recover`, `status` and `doctor`: `@shardkit/prisma`'s `recoverAtomic`
// (with `dryRun` for the ones that only look), each database's questions bounded by `timeoutMs`.
import {
  type AtomicRecoveryReport,
  type Database,
  DatabaseTimeoutError,
  type InDoubtTransaction,
  recoverAtomic,
} from "@shardkit/prisma";
import { withDeadline } from "@shardkit/prisma/internal";
import type { RawClient } from "./config.js";
import { alignRight, duration, oneLine, plural, table } from "./format.js";

/** The coordinator's lease `recoverAtomic` uses by default (and the routers, unless configured). */
export const DEFAULT_LEASE_MS = 10_000;

/** What recovery does with a prepared transaction: commit it, roll it back, or leave it for now. */
export type RecoverPlan = "commit" | "roll back" | "leave";

/** One prepared transaction of an atomic action. */
export interface InDoubtEntry {
  database: string;
  gid: string;
  /** The action (`AtomicDecision.id`) and the router process that coordinated it. */
  action: string;
  coordinator: string;
  shards: string[];
  /** How many databases the action wrote to. */
  participants: number;
  ageMs: number;
  /** What its deciding database says (`unknown`: not in this configuration, or it did not answer). */
  decision: InDoubtTransaction["decision"];
  /** What recovery does with it, and why. */
  plan: RecoverPlan;
  why: string;
  /** What recovery did (a run that changes things; absent with `dryRun`). */
  outcome?: InDoubtTransaction["outcome"];
}

/** One database's prepared transactions of atomic actions, counted. */
export interface InDoubtDatabase {
  database: string;
  count: number;
  /** Age of the oldest, by its server's clock. */
  oldestMs: number | null;
  /** How many recovery commits, rolls back, leaves (within the lease, or undecidable here). */
  commit: number;
  rollBack: number;
  leave: number;
  /** Why it was not read (it did not answer). */
  error?: string;
}

export interface InDoubtReport {
  leaseMs: number;
  transactions: InDoubtEntry[];
  databases: InDoubtDatabase[];
  /** Databases that did not answer (their prepared transactions are not counted). */
  unanswered: { database: string; error: string }[];
}

export interface InDoubtOptions {
  leaseMs?: number;
  /** How long each question to a database may take. */
  timeoutMs: number;
  /** Only read (status, doctor, `recover --dry-run`); otherwise conclude what the plan says. */
  dryRun: boolean;
  onProgress?: (event: { found: number; done: number; entry?: InDoubtEntry }) => void;
}

/** What recovery does with `t`, given its lease: the rules of docs/atomic-commit.md. */
export function planOf(t: InDoubtTransaction, leaseMs: number): { plan: RecoverPlan; why: string } {
  if (t.decision === "unknown")
    return {
      plan: "leave",
      why: "its deciding database is not in this configuration or did not answer",
    };
  if (t.ageMs < leaseMs)
    return {
      plan: "leave",
      why: `within its coordinator's lease (${duration(leaseMs - t.ageMs)} left): it may still finish it`,
    };
  if (t.decision === "commit") return { plan: "commit", why: "its deciding database recorded commit" };
  if (t.decision === "abort") return { plan: "roll back", why: "the action was decided abort" };
  return { plan: "roll back", why: "no decision recorded and its coordinator's lease lapsed" };
}

/**
 * Each database's client with every question bounded by `timeoutMs` (`DatabaseTimeoutError` naming
 * it): a database that does not answer is reported as such, never waited for without end.
 */
function boundedClient(physical: Database<RawClient>, timeoutMs: number): object {
  const client = physical.client;
  const late = () => new DatabaseTimeoutError(physical.name, physical.shards, timeoutMs);
  const bounded = <T>(run: () => PromiseLike<T>) => withDeadline(timeoutMs, late, run);
  return {
    $queryRawUnsafe: (sql: string, ...values: unknown[]) =>
      bounded(() => client.$queryRawUnsafe(sql, ...values)),
    $executeRawUnsafe: (sql: string, ...values: unknown[]) =>
      bounded(() => client.$executeRawUnsafe(sql, ...values)),
    $transaction: (fn: (tx: unknown) => Promise<unknown>) => bounded(() => client.$transaction(fn)),
  };
}

/**
 * The atomic actions in doubt on `databases`, and what recovery does with each; with `dryRun: false`
 * it also does it (`recoverAtomic`: commit where the decision says commit, roll back where none was
 * recorded once the lease lapsed, leave the rest).
 */
export async function readInDoubt(
  databases: readonly Database<RawClient>[],
  options: InDoubtOptions,
): Promise<InDoubtReport> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const entryOf = (t: InDoubtTransaction): InDoubtEntry => ({
    database: t.database,
    gid: t.gid,
    action: t.action,
    coordinator: t.coordinator,
    shards: t.shards.map((s) => s.key),
    participants: t.participants,
    ageMs: Math.round(t.ageMs),
    decision: t.decision,
    ...planOf(t, leaseMs),
    ...(options.dryRun ? {} : { outcome: t.outcome }),
  });
  const report: AtomicRecoveryReport = await recoverAtomic(
    databases.map((d) => ({ client: boundedClient(d, options.timeoutMs), name: d.name })),
    {
      leaseMs,
      dryRun: options.dryRun,
      onProgress: (e) =>
        options.onProgress?.({
          found: e.found,
          done: e.done,
          ...(e.transaction ? { entry: entryOf(e.transaction) } : {}),
        }),
    },
  );
  const transactions = report.transactions.map(entryOf);
  const unanswered = report.unanswered.map((u) => ({ database: u.database, error: oneLine(u.error) }));
  return {
    leaseMs,
    transactions,
    unanswered,
    databases: databases.map((d) => {
      const own = transactions.filter((t) => t.database === d.name);
      const error = unanswered.find((u) => u.database === d.name)?.error;
      return {
        database: d.name,
        count: own.length,
        oldestMs: own.length > 0 ? Math.max(...own.map((t) => t.ageMs)) : null,
        commit: own.filter((t) => t.plan === "commit").length,
        rollBack: own.filter((t) => t.plan === "roll back").length,
        leave: own.filter((t) => t.plan === "leave").length,
        ...(error !== undefined ? { error } : {}),
      };
    }),
  };
}

/** The in-doubt section of `status` and `doctor`: one line per database that has any, or that did not answer. */
export function renderInDoubt(report: InDoubtReport): string[] {
  const rows = report.databases.filter((d) => d.count > 0 || d.error !== undefined);
  if (rows.length === 0) return [];
  const total = report.transactions.length;
  return [
    "",
    `atomic actions in doubt: ${plural(total, "prepared transaction")} (\`shardkit recover\` concludes those past the ${duration(report.leaseMs)} lease)`,
    table(
      ["DATABASE", alignRight("IN DOUBT"), alignRight("OLDEST"), "RECOVER WOULD"],
      rows.map((d) => [
        d.database,
        d.error !== undefined ? "?" : d.count,
        duration(d.oldestMs),
        d.error !== undefined
          ? `not read: ${d.error}`
          : [
              d.commit > 0 ? `commit ${d.commit}` : "",
              d.rollBack > 0 ? `roll back ${d.rollBack}` : "",
              d.leave > 0 ? `leave ${d.leave}` : "",
            ]
              .filter(Boolean)
              .join(", "),
      ]),
    ),
  ];
}

/** `doctor`'s check of the atomic actions in doubt: one finding per database that has some past the lease. */
export function inDoubtCheck(report: InDoubtReport): {
  findings: { check: "in_doubt"; severity: "error" | "warning"; message: string; databases: string[] }[];
  check: { check: "in_doubt"; status: "ok" | "warning" | "error" | "skipped"; summary: string };
} {
  const findings: ReturnType<typeof inDoubtCheck>["findings"] = [];
  for (const d of report.databases) {
    const own = report.transactions.filter((t) => t.database === d.database);
    const undecidable = own.filter((t) => t.decision === "unknown");
    if (undecidable.length > 0)
      findings.push({
        check: "in_doubt",
        severity: "error",
        message: `${d.database}: ${plural(undecidable.length, "prepared transaction")} of atomic actions whose deciding database is not in this configuration or did not answer (${undecidable[0]!.gid}${undecidable.length > 1 ? ", ..." : ""}): recover them with a configuration that lists it`,
        databases: [d.database],
      });
    if (d.commit + d.rollBack > 0)
      findings.push({
        check: "in_doubt",
        severity: "warning",
        message: `${d.database}: ${plural(d.commit + d.rollBack, "prepared transaction")} of atomic actions past the ${duration(report.leaseMs)} lease, the oldest ${duration(d.oldestMs)} (they hold their rows' locks; no router's recovery concluded them): \`shardkit recover\` would commit ${d.commit}, roll back ${d.rollBack}`,
        databases: [d.database],
      });
  }
  const total = report.transactions.length;
  const read = report.databases.length - report.unanswered.length;
  const status = findings.some((f) => f.severity === "error")
    ? "error"
    : findings.length > 0
      ? "warning"
      : read === 0
        ? "skipped"
        : "ok";
  return {
    findings,
    check: {
      check: "in_doubt",
      status,
      summary:
        read === 0
          ? "no database answered"
          : total === 0
            ? `no atomic action in doubt on ${plural(read, "database")}`
            : `${plural(total, "prepared transaction")} of atomic actions, ${report.transactions.filter((t) => t.plan === "leave" && t.decision !== "unknown").length} within the lease`,
    },
  };
}
