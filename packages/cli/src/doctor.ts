import { readPartitionMap } from "@shardkit/ownership";
import {
  CLOCK_SKEW_LIMIT_MS,
  checkConnectionBudget,
  checkDistinctDatabases,
  type Database,
  describeSkew,
  isShardkitError,
  type ServerBudget,
  shardHealth,
  skewedRouters,
  sumShardLoad,
} from "@shardkit/prisma";
import { atomicRefusals } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { type ConfigOptions, openConfig, type RawClient } from "./config.js";
import {
  compareSchemas,
  type DriftReport,
  FINGERPRINT_SQL,
  HAS_MIGRATIONS_SQL,
  MIGRATIONS_SQL,
  type SchemaObject,
} from "./drift.js";
import { UsageError } from "./errors.js";
import { plural, table } from "./format.js";
import { type InDoubtReport, inDoubtCheck, readInDoubt, renderInDoubt } from "./in-doubt.js";

export interface DoctorOptions extends ConfigOptions {
  /** How long each database may take to answer. Default 5000 ms. */
  timeoutMs?: number;
  /** Service instances that each open the configuration's pools: the connection budget counts pools x instances. Default 1. */
  instances?: number;
  /** Warnings (e.g. `wal_level` not logical) count as problems too. Default false. */
  strict?: boolean;
  /** Atomic actions: the coordinators' lease (a prepared transaction older than it is an orphan). Default 10 s. */
  leaseMs?: number;
}

export type DoctorCheck =
  | "reachable"
  | "distinct"
  | "budget"
  | "wal_level"
  | "drift"
  | "moves"
  | "placement"
  | "clocks"
  | "atomic"
  | "in_doubt";

export interface DoctorFinding {
  check: DoctorCheck;
  /** `error`: a problem (exit code 1); `warning`: a problem only with `strict`. */
  severity: "error" | "warning";
  message: string;
  databases: string[];
}

export interface DoctorReport {
  /** No errors (and, with `strict`, no warnings): exit code 0. */
  ok: boolean;
  strict: boolean;
  checks: { check: DoctorCheck; status: "ok" | "warning" | "error" | "skipped"; summary: string }[];
  findings: DoctorFinding[];
  /** Each server's connection budget: its limit and the pools (x instances) of the databases on it. */
  servers: (ServerBudget & { instances: number; available: number })[];
  /** Each database's `wal_level`. */
  walLevels: { database: string; walLevel: string }[];
  drift: DriftReport;
  /** Atomic actions in doubt (prepared transactions), per database, and what `shardkit recover` would do. */
  inDoubt: InDoubtReport;
}

type Answer<T> = { physical: Database<RawClient>; value: T };

/** Runs `fn` on every database at once; those that fail or take longer than `timeoutMs` are left out. */
async function ask<T>(
  databases: readonly Database<RawClient>[],
  timeoutMs: number,
  fn: (client: RawClient) => Promise<T>,
): Promise<Answer<T>[]> {
  const result = await scatter(databases, (p) => fn(p.client), {
    policy: "partial",
    targetTimeoutMs: timeoutMs,
    key: (p) => String(p.index),
  });
  return result.outcomes.flatMap((o) =>
    o.status === "fulfilled" ? [{ physical: o.target, value: o.value }] : [],
  );
}

/**
 * Checks a configuration against its databases: every database answers; no database is listed
 * twice under two URLs (`checkDistinctDatabases`); the pools fit each server's `max_connections`
 * (`checkConnectionBudget`, times `instances`); `wal_level` is `logical` (live moves need it: a
 * warning); and every database has the same schema (tables, columns, indexes, constraints, enums,
 * applied migrations), each database that differs from the most common schema listed with how;
 * and every shard sits on a database its group's placement rule allows (`placement` in the config);
 * routers' clocks; whether atomic actions can run (`max_prepared_transactions`); atomic actions in doubt.
 * Longer than 80 lines: its checks in the order the report lists them, on one set of answers.
 */
export async function doctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const instances = options.instances ?? 1;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
    throw new UsageError([`--timeout: expected a positive number of ms, got ${timeoutMs}`]);
  if (!(Number.isInteger(instances) && instances >= 1))
    throw new UsageError([`--instances: expected an integer >= 1, got ${instances}`]);
  const opened = openConfig(options);
  const findings: DoctorFinding[] = [];
  const checks: DoctorReport["checks"] = [];
  try {
    const { registry } = opened;
    const all = registry.databases;

    // Which databases answer, and whether two entries are one database.
    const probed = await shardHealth(registry, { timeoutMs });
    const down = probed.databases
      .map((health, i) => ({ physical: all[i]!, health }))
      .filter((d) => d.health.state !== "up")
      .map((d) => ({ physical: d.physical, error: d.health.error ?? d.health.state }));
    const up = all.filter((p) => !down.some((d) => d.physical === p));
    for (const d of down)
      findings.push({
        check: "reachable",
        severity: "error",
        message: `${d.physical.name} does not answer: ${d.error}; it was not checked`,
        databases: [d.physical.name],
      });
    checks.push({
      check: "reachable",
      status: down.length > 0 ? "error" : "ok",
      summary: `${up.length} of ${plural(all.length, "database")} answer`,
    });

    try {
      await checkDistinctDatabases(registry);
      checks.push({ check: "distinct", status: "ok", summary: "each database is listed once" });
    } catch (error) {
      if (!isShardkitError(error, "INVALID_CONFIG")) throw error;
      for (const issue of error.issues)
        findings.push({
          check: "distinct",
          severity: "error",
          message: issue,
          databases: all.filter((p) => issue.includes(p.name)).map((p) => p.name),
        });
      checks.push({
        check: "distinct",
        status: "error",
        summary: `${plural(error.issues.length, "database")} listed twice (every scatter would read it twice)`,
      });
    }

    const budget = await checkConnectionBudget(registry, { onExceeded: "warn", logger: { warn() {} } });
    const servers = budget.servers.map((s) => ({
      ...s,
      instances,
      available: s.maxConnections - s.reserved,
    }));
    const over = servers.filter((s) => s.pools * instances > s.available);
    const pooled = registry.databases.filter((p) => p.pool === undefined);
    for (const s of over)
      findings.push({
        check: "budget",
        severity: "error",
        message: `server ${s.server}: pools of ${s.pools}${instances > 1 ? ` x ${instances} instances = ${s.pools * instances}` : ""} connections exceed max_connections ${s.maxConnections} - ${s.reserved} reserved = ${s.available} (${s.databases.map((d) => `${d.name}: ${d.pool}`).join(", ")})`,
        databases: s.databases.map((d) => d.name),
      });
    checks.push({
      check: "budget",
      status: over.length > 0 ? "error" : servers.length === 0 && pooled.length === 0 ? "skipped" : "ok",
      summary: [
        ...(servers.length === 0 && pooled.length === 0 ? ["no server answered"] : []),
        ...servers.map((s) => `${s.pools * instances} of ${s.available} connections on server ${s.server}`),
        // Behind a transaction-mode pooler, the routers' pools are the pooler's clients (its
        // max_client_conn bounds them); the server sees the pooler's own pool.
        ...(pooled.length > 0
          ? [`${plural(pooled.length, "database")} behind a pooler (pooler: true), not counted on the server`]
          : []),
      ].join("; "),
    });

    const wal = await ask(up, timeoutMs, async (c) => {
      const [row] = await c.$queryRawUnsafe<{ level: string }[]>(
        "SELECT current_setting('wal_level') AS level",
      );
      return row!.level;
    });
    const walLevels = wal.map((w) => ({ database: w.physical.name, walLevel: w.value }));
    const notLogical = walLevels.filter((w) => w.walLevel !== "logical");
    if (notLogical.length > 0)
      findings.push({
        check: "wal_level",
        severity: "warning",
        message: `wal_level is not logical on ${notLogical.map((w) => `${w.database} (${w.walLevel})`).join(", ")}: a live move from these databases cannot start (set wal_level = logical and restart the server, or move with --mode offline)`,
        databases: notLogical.map((w) => w.database),
      });
    checks.push({
      check: "wal_level",
      status: notLogical.length > 0 ? "warning" : walLevels.length === 0 ? "skipped" : "ok",
      summary:
        notLogical.length > 0
          ? `${notLogical.length} of ${plural(walLevels.length, "database")} not logical`
          : `logical on ${plural(walLevels.length, "database")}`,
    });

    const schemas = await ask(up, timeoutMs, async (c) => {
      const objects = await c.$queryRawUnsafe<SchemaObject[]>(FINGERPRINT_SQL);
      const [has] = await c.$queryRawUnsafe<{ present: boolean }[]>(HAS_MIGRATIONS_SQL);
      if (has?.present) objects.push(...(await c.$queryRawUnsafe<SchemaObject[]>(MIGRATIONS_SQL)));
      return objects;
    });
    const drift = compareSchemas(schemas.map((s) => ({ database: s.physical.name, objects: s.value })));
    for (const d of drift.differences) {
      const parts = [
        ...d.missing.map((m) => `missing ${m}`),
        ...d.extra.map((e) => `extra ${e}`),
        ...d.changed.map((c) => `changed ${c}`),
      ];
      findings.push({
        check: "drift",
        severity: "error",
        message: `${d.database} differs from the schema of ${plural(drift.reference.length, "database")} (${drift.reference[0]}${drift.reference.length > 1 ? ", ..." : ""}): ${parts.slice(0, 8).join("; ")}${parts.length > 8 ? `; and ${parts.length - 8} more (--json lists all)` : ""}`,
        databases: [d.database],
      });
    }
    checks.push({
      check: "drift",
      status: schemas.length < 2 ? "skipped" : drift.differences.length > 0 ? "error" : "ok",
      summary:
        schemas.length < 2
          ? "fewer than two databases answered"
          : drift.differences.length > 0
            ? `${drift.differences.length} of ${plural(schemas.length, "database")} differ from the others`
            : `${plural(schemas.length, "database")}, one schema`,
    });

    // Moves: one that stopped half-way (its lease lapsed) and replication objects no move holds (a
    // slot holds WAL on its server, a disk-filling hazard, until dropped).
    const view = await readPartitionMap(registry, { timeoutMs });
    for (const m of view.stopped)
      findings.push({
        check: "moves",
        severity: "error",
        message: `a move of shard ${m.shard.key} from ${m.database} to ${m.to} stopped at ${m.step} (${m.step === "abandoned" ? m.holder : `its holder ${m.holder || "(an earlier version)"} let its lease lapse`}): run \`shardkit move ${m.shard.key} --to ...\` to finish or undo it`,
        databases: [m.database],
      });
    for (const o of view.leftovers)
      findings.push({
        check: "moves",
        severity: "error",
        message: `${o.database}: ${o.kind} ${o.name} belongs to no move under way${o.walBytes !== undefined ? ` and holds ${o.walBytes} bytes of WAL` : ""}: the next move of its shard drops it (or drop it by hand)`,
        databases: [o.database],
      });
    const live = view.databases.flatMap((d) => d.moves.filter((m) => m.live));
    checks.push({
      check: "moves",
      status: view.stopped.length + view.leftovers.length > 0 ? "error" : "ok",
      summary:
        view.stopped.length + view.leftovers.length > 0
          ? `${plural(view.stopped.length, "stopped move")}, ${plural(view.leftovers.length, "replication object")} no move holds`
          : `${plural(live.length, "move")} under way, nothing left behind`,
    });

    // Placement rules: a shard whose database (its owner by the records, else where the
    // configuration puts it) has labels its group's rule does not allow is already in the wrong place.
    if (registry.placement.empty)
      checks.push({ check: "placement", status: "skipped", summary: "no placement rules" });
    else {
      let misplaced = 0;
      for (const p of view.shards) {
        const at = p.owner ?? p.configured;
        const rule = registry.placement.allows(p.shard, at);
        if (rule === undefined) continue;
        misplaced++;
        findings.push({
          check: "placement",
          severity: "error",
          message: `shard ${p.shard.key} is on ${at.name}, which breaks ${rule}: move it (shardkit move ${p.shard.key} --to ...) to a database the rule allows`,
          databases: [at.name],
        });
      }
      checks.push({
        check: "placement",
        status: misplaced > 0 ? "error" : "ok",
        summary:
          misplaced > 0
            ? `${misplaced} of ${plural(view.shards.length, "shard")} on a database their rule does not allow`
            : `${plural(view.shards.length, "shard")} checked against ${plural(registry.placement.rules.length, "rule")}, none misplaced`,
      });
    }

    const clocks = await checkClocks(up, timeoutMs);
    findings.push(...clocks.findings);
    checks.push(clocks.check);

    const atomic = await checkAtomic(up, timeoutMs);
    findings.push(...atomic.findings);
    checks.push(atomic.check);

    // Atomic actions in doubt: an orphan past its lease holds its rows' locks until recovered.
    const inDoubt = await readInDoubt(up, {
      timeoutMs,
      dryRun: true,
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    });
    const doubt = inDoubtCheck(inDoubt);
    findings.push(...doubt.findings);
    checks.push(doubt.check);

    const strict = options.strict ?? false;
    const ok = !findings.some((f) => f.severity === "error" || (strict && f.severity === "warning"));
    return { ok, strict, checks, findings, servers, walLevels, drift, inDoubt };
  } finally {
    await opened.close();
  }
}

/** How far back the routers' last flushes are read for their clocks. */
const CLOCKS_SPAN_MS = 10 * 60_000;

/**
 * Routers whose clock is off their databases' (measured at each flush of their load windows, over
 * the last 10 minutes): a warning each. Their load is counted by the database's clock all the
 * same; their own timestamps (IDs, logs) are off.
 */
async function checkClocks(
  up: readonly Database<RawClient>[],
  timeoutMs: number,
): Promise<{ findings: DoctorFinding[]; check: DoctorReport["checks"][number] }> {
  const sums = await ask(up, timeoutMs, (c) => sumShardLoad(c, { spanMs: CLOCKS_SPAN_MS, topKeys: 0 }));
  const skewed = skewedRouters(sums.map((s) => s.value));
  const routers = new Set(sums.flatMap((s) => s.value.routers.map((r) => r.router)));
  const findings: DoctorFinding[] = skewed.map((r) => ({
    check: "clocks",
    severity: "warning",
    message: `${describeSkew(r)} (more than ${CLOCK_SKEW_LIMIT_MS / 1000} s): its load is counted by the database's clock, but the IDs and logs it stamps are off; set its clock right (NTP)`,
    databases: sums
      .filter((s) => s.value.routers.some((x) => x.router === r.router))
      .map((s) => s.physical.name),
  }));
  return {
    findings,
    check: {
      check: "clocks",
      status: skewed.length > 0 ? "warning" : routers.size === 0 ? "skipped" : "ok",
      summary:
        routers.size === 0
          ? "no router flushed load in the last 10 minutes"
          : skewed.length > 0
            ? `${skewed.length} of ${plural(routers.size, "router")} with a clock off by more than ${CLOCK_SKEW_LIMIT_MS / 1000} s`
            : `${plural(routers.size, "router")}, clocks within ${CLOCK_SKEW_LIMIT_MS / 1000} s of their databases'`,
    },
  };
}

/**
 * Whether atomic actions (`$action(fn, { atomic: true })`, opt-in) can run: every server they touch
 * needs `max_prepared_transactions > 0`. None allowing them is a fleet that does not use them; some
 * allowing them and some not is a warning, naming the databases an atomic action would be refused on.
 */
async function checkAtomic(
  up: readonly Database<RawClient>[],
  timeoutMs: number,
): Promise<{ findings: DoctorFinding[]; check: DoctorReport["checks"][number] }> {
  const answers = await ask(up, timeoutMs, async (c) => {
    const [row] = await c.$queryRawUnsafe<{ n: number }[]>(
      "SELECT current_setting('max_prepared_transactions')::int AS n",
    );
    return Number(row!.n);
  });
  const { refusing: off, warning } = atomicRefusals(
    answers.map((a) => ({ name: a.physical.name, prepared: a.value })),
  );
  const mixed = warning !== undefined;
  const findings: DoctorFinding[] = mixed
    ? [{ check: "atomic", severity: "warning", message: warning, databases: off }]
    : [];
  const n = plural(answers.length, "database");
  return {
    findings,
    check: {
      check: "atomic",
      status: mixed ? "warning" : answers.length === 0 ? "skipped" : "ok",
      summary: mixed
        ? `${off.length} of ${n} refuse atomic actions (max_prepared_transactions = 0)`
        : off.length > 0
          ? `not enabled: max_prepared_transactions = 0 (the default) on ${n}; sagas need nothing`
          : `max_prepared_transactions > 0 on ${n}: atomic actions can run`,
    },
  };
}

/** `doctor` for people. */
export function renderDoctor(report: DoctorReport): string {
  const lines = [
    table(
      ["CHECK", "RESULT", "SUMMARY"],
      report.checks.map((c) => [c.check, c.status === "error" ? "FAIL" : c.status, c.summary]),
    ),
  ];
  lines.push(...renderInDoubt(report.inDoubt));
  if (report.findings.length > 0) lines.push("");
  for (const f of report.findings) lines.push(`${f.severity}: ${f.check}: ${f.message}`);
  lines.push(
    "",
    report.ok
      ? "no problems found"
      : `${plural(report.findings.filter((f) => f.severity === "error" || report.strict).length, "problem")} found`,
  );
  return `${lines.join("\n")}\n`;
}
