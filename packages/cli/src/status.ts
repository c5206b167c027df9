import type { PartitionView } from "@shardkit/ownership";
import { isShardkitError, readOutboxLag, type ShardHealth, shardHealth } from "@shardkit/prisma";
import { type ConfigOptions, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { alignRight, bytes, duration, oneLine, plainDbError, plural, table } from "./format.js";
import { type InDoubtReport, readInDoubt, renderInDoubt } from "./in-doubt.js";
import { applyRecords, isMissingTable } from "./records.js";

export interface StatusOptions extends ConfigOptions {
  /**
   * How long each database may take to answer each question, and to accept a connection (a
   * connection not made in time makes it `slow`, as an answer late would). Default 5000 ms.
   */
  timeoutMs?: number;
  /** Atomic actions: the coordinators' lease (what `shardkit recover` would leave). Default 10 s. */
  leaseMs?: number;
}

/**
 * Whether a database answered `status`'s questions (its ownership records, the health probe, its
 * outbox), each within `timeoutMs`: `yes`; `slow`: one did not answer in time and none failed (busy
 * or frozen: not known to be down); `no`: one failed (down, refused, unknown). One value per
 * database: its shards' rows and the lists at the end show it.
 */
export type StatusAnswer = "yes" | "slow" | "no";

/** One logical shard in `status`. */
export interface StatusShard {
  shard: string;
  /** The database that holds it now: its owner by the ownership records, else the configuration's. */
  database: string;
  /** Where the configuration places it, when that is not where it is now (it moved since). */
  configured?: string;
  /** Whether that database answered (its `StatusDatabase.reachable`). */
  reachable: StatusAnswer;
  latencyMs: number | null;
  /** Why it is not `yes`. */
  error?: string;
  /** The database that owns it by the ownership records (`null`: no record, the configuration holds). */
  owner: string | null;
  epoch: number | null;
  /** `owned`, `fenced` (between owners), `unrecorded` (no partition map opened yet) or `unknown`. */
  state: "owned" | "fenced" | "unrecorded" | "unknown";
  /** The database it is being moved to, when a move is under way. */
  movingTo: string | null;
  /** Every database's record of it. */
  records: { database: string; epoch: number; state: string; peer: string | null }[];
}

/** One physical database in `status`: reachability and its outbox (per database, as the relay reports it). */
export interface StatusDatabase {
  database: string;
  shards: string[];
  /** Whether it answered every question in time (`yes`), not in time (`slow`), or failed (`no`). */
  reachable: StatusAnswer;
  /** Why it is not `yes`, or why its outbox could not be read. */
  error?: string;
  /**
   * `present`, `absent` (no `OutboxEvent` table), `unavailable` (the database did not answer), or
   * `spare` (it holds no shard: no relay delivers from it, so its outbox is not reported).
   */
  outbox: "present" | "absent" | "unavailable" | "spare";
  pending: number | null;
  /** Age of the oldest pending event. */
  oldestPendingMs: number | null;
  /** Dead letters (`shardkit redrive` puts them back to pending). */
  dead: number | null;
}

export interface StatusReport {
  /**
   * False when a database failed or did not answer in time, or the ownership records cannot be
   * right (exit code 1).
   */
  ok: boolean;
  /** Where the configuration came from. */
  config: string;
  shards: StatusShard[];
  databases: StatusDatabase[];
  /** Names of the databases that failed to answer (`reachable: "no"`). */
  unreachable: string[];
  /** Names of the databases that did not answer within `timeoutMs` (`reachable: "slow"`). */
  slow: string[];
  /** Dead letters over every database that answered. */
  deadLetters: number;
  /**
   * What cannot be right about the ownership records (`readPartitionMap`'s `issues`: a shard with
   * two owners, an owner behind another record's epoch, a malformed record, a database that is not
   * in the configuration): a `PartitionMap` would refuse to open over them.
   */
  issues: string[];
  /** Moves under way: their shard, target, step, holder, and when their lease lapses unless renewed. */
  moves: StatusMove[];
  /**
   * Moves that stopped (their lease lapsed, or a router gave their fenced shard back to its owner):
   * the next `shardkit move` of the shard takes each over and finishes or undoes it. Exit code 1.
   */
  stopped: StatusMove[];
  /**
   * Replication objects of moves (`shardkit_move_*`) that no live move holds. A slot among them holds
   * WAL on its server (`walBytes`) until it is dropped: the next `shardkit move` of its shard drops
   * it. Exit code 1.
   */
  leftovers: {
    database: string;
    kind: "slot" | "publication" | "subscription";
    name: string;
    shard: string;
    walBytes?: number;
  }[];
  /** Atomic actions in doubt per database: how many, the oldest, what `shardkit recover` would do (`doctor` warns past the lease). */
  inDoubt: InDoubtReport;
}

/** A move's record, as `status` shows it. */
export interface StatusMove {
  shard: string;
  /** Its source: where its record (its lease) is. */
  from: string;
  to: string;
  step: string;
  holder: string;
  /** Milliseconds until its lease lapses unless renewed (zero or less: lapsed). */
  expiresInMs: number;
}

/**
 * Each shard's database, reachability, epoch and owner state, and each database's outbox lag and
 * dead letters. Reads only (SELECTs); every database is asked at once, each bounded by `timeoutMs`.
 * Longer than 80 lines: the three questions asked at once, then one answer per database.
 */
export async function status(options: StatusOptions = {}): Promise<StatusReport> {
  const timeoutMs = options.timeoutMs ?? 5000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
    throw new UsageError([`--timeout: expected a positive number of ms, got ${timeoutMs}`]);
  const opened = openConfig({ ...options, connectTimeoutMs: timeoutMs });
  try {
    const { registry } = opened;
    // First where each shard is now (by the ownership records), then its health and outbox there.
    const view = await applyRecords(opened, timeoutMs);
    // Probed after the records were read, so a shard's latency is a round trip, not the client's start.
    const [health, lag, inDoubt] = await Promise.all([
      shardHealth(registry, { timeoutMs }),
      readOutboxLag(registry, { timeoutMs }),
      readInDoubt(registry.databases, {
        timeoutMs,
        dryRun: true,
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      }),
    ]);
    const databases: StatusDatabase[] = registry.databases.map((physical, i) => {
      // A database that holds no shard (a spare) has no outbox of its own to report.
      const spare = physical.shards.length === 0;
      const outbox = spare ? { pending: null, dead: null, oldestPendingMs: null, error: undefined } : lag[i]!;
      const absent = outbox.error !== undefined && isMissingTable(outbox.error);
      const answer = answerOf(
        view.databases[i]!,
        health.shards.filter((h) => h.database === physical.name),
        absent ? undefined : outbox.error,
        timeoutMs,
      );
      const error =
        answer.error ?? (outbox.error !== undefined && !absent ? oneLine(outbox.error) : undefined);
      return {
        database: physical.name,
        shards: physical.shards.map((s) => s.key),
        reachable: answer.reachable,
        ...(error !== undefined ? { error } : {}),
        outbox: spare ? "spare" : outbox.error === undefined ? "present" : absent ? "absent" : "unavailable",
        pending: outbox.pending,
        oldestPendingMs: outbox.oldestPendingMs,
        dead: outbox.dead,
      };
    });
    const byShard = new Map(health.shards.map((h) => [h.shard, h]));
    const shards: StatusShard[] = view.shards.map((read) => {
      const { shard, configured } = read;
      const h = byShard.get(shard.key)!;
      const database = databases.find((d) => d.database === h.database)!;
      return {
        shard: shard.key,
        database: h.database,
        ...(configured.name !== h.database ? { configured: configured.name } : {}),
        reachable: database.reachable,
        latencyMs: h.latencyMs ?? null,
        ...(database.reachable !== "yes" && database.error !== undefined ? { error: database.error } : {}),
        owner: read.owner?.name ?? null,
        epoch: read.epoch,
        state: read.state,
        movingTo: read.movingTo,
        records: read.records,
      };
    });
    const unreachable = databases.filter((d) => d.reachable === "no").map((d) => d.database);
    const slow = databases.filter((d) => d.reachable === "slow").map((d) => d.database);
    const moves = view.databases.flatMap((d) =>
      d.moves.map((m) => ({
        live: m.live,
        move: {
          shard: m.shard.key,
          from: d.database,
          to: m.to,
          step: m.step,
          holder: m.holder,
          expiresInMs: m.expiresInMs,
        },
      })),
    );
    const stopped = moves.filter((m) => !m.live).map((m) => m.move);
    const leftovers = view.leftovers.map((o) => ({
      database: o.database,
      kind: o.kind,
      name: o.name,
      shard:
        Number.isInteger(o.shard) && o.shard >= 0 && o.shard < 1 << 14
          ? `${o.shard >> 6}/${o.shard & 63}`
          : String(o.shard),
      ...(o.walBytes !== undefined ? { walBytes: o.walBytes } : {}),
    }));
    return {
      ok:
        unreachable.length === 0 &&
        slow.length === 0 &&
        view.issues.length === 0 &&
        stopped.length === 0 &&
        leftovers.length === 0,
      config: opened.source,
      shards,
      databases,
      unreachable,
      slow,
      deadLetters: databases.reduce((sum, d) => sum + (d.dead ?? 0), 0),
      issues: view.issues,
      moves: moves.filter((m) => m.live).map((m) => m.move),
      stopped,
      leftovers,
      inDoubt,
    };
  } finally {
    await opened.close();
  }
}

/**
 * A connection the server did not accept within the connect timeout (`--timeout`): busy, not known
 * to be down (the pool's own words, as the driver passes them on).
 */
function connectLate(error: string | undefined): boolean {
  return error !== undefined && /timeout exceeded when trying to connect|connection timeout/i.test(error);
}

/**
 * One database's answer from every question `status` asked it: a failure makes it `no` (with that
 * error), else a question not answered in time makes it `slow`, else `yes`.
 */
function answerOf(
  records: PartitionView["databases"][number],
  probes: readonly ShardHealth[],
  outboxError: unknown,
  timeoutMs: number,
): { reachable: StatusAnswer; error?: string } {
  const failed: string[] = [];
  let late = false;
  // The health probe's error first: it says it plainest (`Can't reach database server at ...`).
  for (const probe of probes) {
    if (probe.state === "slow" || connectLate(probe.error)) late = true;
    else if (probe.state !== "up") failed.push(plainDbError(probe.error ?? probe.state));
  }
  if (records.status === "unavailable") {
    if (records.timedOut || connectLate(records.error)) late = true;
    else failed.push(records.error);
  }
  if (outboxError !== undefined) {
    if (isShardkitError(outboxError, "DEADLINE_EXCEEDED") || connectLate(oneLine(outboxError))) late = true;
    else failed.push(oneLine(outboxError));
  }
  if (failed.length > 0) return { reachable: "no", error: failed[0]! };
  if (late) return { reachable: "slow", error: `did not answer within ${timeoutMs} ms` };
  return { reachable: "yes" };
}

/**
 * `status` for people: the shards, the outboxes, the databases that did not answer, the ownership
 * records' problems, then the moves (`moveLines`).
 */
export function renderStatus(report: StatusReport): string {
  const ownership = (s: StatusShard) => {
    if (s.state === "unrecorded") return "unrecorded (no partition map yet)";
    if (s.state === "unknown") return "unknown";
    const moving = s.movingTo ? `, moving to ${s.movingTo}` : "";
    const moved = s.configured ? ` (moved; the configuration says ${s.configured})` : "";
    return `${s.state}${moving}${moved}`;
  };
  const lines = [
    `shards (configuration: ${report.config})`,
    table(
      ["SHARD", "DATABASE", "REACHABLE", alignRight("LATENCY"), alignRight("EPOCH"), "OWNER STATE"],
      report.shards.map((s) => [
        s.shard,
        s.database,
        s.reachable === "no" ? "NO" : s.reachable,
        s.latencyMs === null ? null : `${s.latencyMs} ms`,
        s.epoch,
        ownership(s),
      ]),
    ),
    "",
    "outbox (per database)",
    table(
      ["DATABASE", "SHARDS", alignRight("PENDING"), alignRight("OLDEST PENDING"), alignRight("DEAD LETTERS")],
      report.databases.map((d) => [
        d.database,
        d.shards.join(",") || "(spare)",
        d.outbox === "absent" ? "no outbox" : d.pending,
        d.outbox === "present" && d.pending ? duration(d.oldestPendingMs) : null,
        d.dead,
      ]),
    ),
  ];
  const of = `of ${report.databases.length}`;
  if (report.unreachable.length > 0)
    lines.push(
      ...unanswered(report, "no", `${plural(report.unreachable.length, "database")} ${of} unreachable:`),
    );
  if (report.slow.length > 0)
    lines.push(
      ...unanswered(
        report,
        "slow",
        `${plural(report.slow.length, "database")} ${of} slow (busy or frozen, not known to be down; a longer --timeout may get the answer):`,
      ),
    );
  if (report.issues.length > 0) {
    lines.push(
      "",
      `${plural(report.issues.length, "problem")} with the ownership records (a partition map would refuse them):`,
      ...report.issues.map((issue) => `  ${issue}`),
    );
  }
  lines.push(...moveLines(report));
  return `${lines.join("\n")}\n`;
}

/** The moves of `report` for people: under way, stopped half-way, what they left behind, dead letters. */
function moveLines(report: StatusReport): string[] {
  const lines: string[] = [];
  if (report.moves.length > 0) {
    lines.push(
      "",
      "moves under way",
      table(
        ["SHARD", "FROM", "TO", "STEP", "HOLDER", alignRight("LEASE")],
        report.moves.map((m) => [
          m.shard,
          m.from,
          m.to,
          m.step,
          m.holder,
          `${duration(Math.max(0, m.expiresInMs))} left`,
        ]),
      ),
    );
  }
  if (report.stopped.length > 0) {
    lines.push(
      "",
      `${plural(report.stopped.length, "move")} stopped half-way (the next \`shardkit move\` of the shard takes it over and finishes or undoes it):`,
      ...report.stopped.map(
        (m) =>
          `  ${m.shard}: ${m.from} -> ${m.to}, stopped at ${m.step}, ${m.step === "abandoned" ? m.holder : `held by ${m.holder || "an earlier version"}, lease lapsed ${duration(-m.expiresInMs)} ago`}`,
      ),
    );
  }
  if (report.leftovers.length > 0) {
    lines.push(
      "",
      `${plural(report.leftovers.length, "replication object")} that no move holds (a slot holds WAL on its server until dropped; the next \`shardkit move\` of its shard drops them):`,
      ...report.leftovers.map(
        (o) =>
          `  ${o.database}: ${o.kind} ${o.name} (shard ${o.shard})${o.walBytes !== undefined ? `, holding ${bytes(o.walBytes)} of WAL` : ""}`,
      ),
    );
  }
  lines.push(...renderInDoubt(report.inDoubt));
  if (report.deadLetters > 0) {
    lines.push(
      "",
      `${plural(report.deadLetters, "dead letter")}: \`shardkit redrive\` puts them back to pending`,
    );
  }
  return lines;
}

/** The databases of `report` that did not answer (`no`) or not in time (`slow`), under `header`, each with why. */
function unanswered(report: StatusReport, reachable: "no" | "slow", header: string): string[] {
  const why = reachable === "no" ? "no answer" : "no answer in time";
  return [
    "",
    header,
    ...report.databases
      .filter((d) => d.reachable === reachable)
      .map((d) => `  ${d.database}: ${d.error ?? why}`),
  ];
}
