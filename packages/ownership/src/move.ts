import { SpanStatusCode, type TracerProvider, trace } from "@opentelemetry/api";
import { ShardIdentifier } from "@shardkit/id";
import type { PhysicalShard, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { MovePrecheckError, MoveTimeoutError, MoveVerifyError, OwnershipOptionsError } from "./errors.js";
import { type PartitionMap, type Raw, raw } from "./map.js";
import type { ShardPlacement } from "./placement.js";
import { type FencedTable, literal, shardOfRowSql } from "./sql.js";
import {
  listedTableIssues,
  resolveTables,
  SHARDKIT_TABLES,
  shardkitTable,
  shardkitTablesAt,
} from "./tables.js";
import { readPartitionMap } from "./view.js";

/** The steps of a move, in order, as progress reports them. */
export type MoveStep =
  | "precheck"
  | "resume"
  | "receive"
  | "publish"
  | "subscribe"
  | "copy"
  | "catch-up"
  | "fence"
  | "final-position"
  | "verify"
  | "switch"
  | "enforce"
  | "teardown"
  | "cleanup"
  | "done";

/**
 * The steps a move of `mode` reports, in order (a stopped move's `resume` comes first when there is
 * one): without `verify` when `verify: false`, without `cleanup` when `cleanup: false`. For a
 * progress bar's total; a test checks that a move reports exactly these.
 */
export function moveSteps(
  mode: "live" | "offline",
  options: { verify?: boolean | undefined; cleanup?: boolean | undefined } = {},
): MoveStep[] {
  const steps: MoveStep[] =
    mode === "live"
      ? [
          "precheck",
          "receive",
          "publish",
          "subscribe",
          "copy",
          "catch-up",
          "fence",
          "final-position",
          "verify",
        ]
      : ["precheck", "receive", "fence", "copy", "verify"];
  steps.push("switch", "enforce", "teardown", "cleanup", "done");
  return steps.filter(
    (s) => !(s === "verify" && options.verify === false) && !(s === "cleanup" && options.cleanup === false),
  );
}

export interface MoveProgress {
  step: MoveStep;
  /** Rows of the shard at the target so far (copy), per table summed. */
  rows?: number;
  /** Bytes of WAL the target is behind the source (catch-up, final-position). */
  lagBytes?: number;
  /** ms since the move started. */
  elapsedMs: number;
}

export interface MoveOptions<Client extends ShardClient> {
  map: PartitionMap<Client>;
  shard: ShardIdentifier | string;
  /** The database that will own the shard (a spare, or one that holds other shards). */
  to: PhysicalShard<Client>;
  /**
   * `live` (default, PostgreSQL): the shard keeps taking writes while its rows stream to the target
   * through logical replication; writes wait only from the fence to the switch. `offline`
   * (PostgreSQL or PGlite, which has no logical replication): fence first, then copy, verify, switch.
   */
  mode?: "live" | "offline";
  /**
   * For `live`: how the target's server reaches the source's, as a libpq connection string
   * (`postgresql://user@host:port/db`): the subscription connects with it.
   */
  sourceConnection?: string;
  /** Compare row counts and checksums per table after the fence, before the switch. Default true. */
  verify?: boolean;
  /** Delete the old copy at the source after the switch (batched; the tombstone stays). Default true. */
  cleanup?: boolean;
  /** How long the copy and catch-up may take before the move gives up and is undone (`MoveTimeoutError`). Default 120 s. */
  timeoutMs?: number;
  /** WAL the target may be behind before the fence (catch-up is done). Default 64 KiB. */
  maxLagBytes?: number;
  /** Each step as it starts. Default: a line per step on stderr. */
  onProgress?(progress: MoveProgress): void;
  /** Called as each step completes; a test's way to stop a move there, as a crash would. */
  afterStep?(step: MoveStep): void | Promise<void>;
  /**
   * OpenTelemetry (through `@opentelemetry/api`): a span `shardkit.move` per move with an event
   * per step (`shardkit.move.step`). Default: the API's global tracer provider (a no-op until the
   * app registers an SDK); `{ tracerProvider }`: that one; `false`: none.
   */
  telemetry?: boolean | { tracerProvider?: TracerProvider | undefined } | undefined;
}

export interface MoveResult {
  shard: string;
  from: string;
  to: string;
  /** The shard's epoch at its new owner. */
  epoch: number;
  mode: "live" | "offline";
  /** Rows of the shard per table, as verified at the target. */
  rows: Record<string, number>;
  /** How long writes to the shard were held: from the fence to the switch. */
  freezeMs: number;
  durationMs: number;
  /** A move that had stopped half-way, found and rolled back or forward before this one. */
  resumed: "rolled-back" | "rolled-forward" | null;
  steps: { step: MoveStep; ms: number }[];
}

const MOVE_TABLE = "ShardMove";

/**
 * Moves one logical shard to another database while it takes writes (PostgreSQL logical
 * replication), or offline (fence, copy, verify, switch; the way for PGlite):
 *
 * precheck -> receive (the target fences the incoming shard) -> publish (a publication of the
 * shard's rows, row-filtered on the shard bits) -> subscribe (initial copy) -> catch-up -> fence ->
 * final position -> verify (counts and checksums per table) -> switch (compare-and-set) ->
 * enforce (the source's tombstone) -> teardown -> cleanup (the old copy, batched).
 *
 * The move is recorded on the source (`ShardMove`). A move that stopped half-way (a crash) is
 * found by the next `moveShard` of the shard and finished when it had switched, or undone
 * otherwise (the target never took a write), then run again: at every point exactly one database
 * accepts the shard's writes, or none (between fence and switch). Replication slots and
 * publications left behind are removed.
 */
export async function moveShard<Client extends ShardClient>(
  options: MoveOptions<Client>,
): Promise<MoveResult> {
  if (options.telemetry === false) return runMove(options);
  const provider = typeof options.telemetry === "object" ? options.telemetry.tracerProvider : undefined;
  const tracer = (provider ?? trace).getTracer("@shardkit/ownership", "0.1.0");
  const shardKey = typeof options.shard === "string" ? options.shard : options.shard?.key;
  const span = tracer.startSpan("shardkit.move", {
    attributes: {
      "db.system.name": "postgresql",
      "shardkit.shard": String(shardKey),
      "shardkit.move.to": String(options.to?.name),
      "shardkit.move.mode": options.mode ?? "live",
    },
  });
  if (!span.isRecording()) {
    span.end();
    return runMove(options);
  }
  const progress = options.onProgress ?? progressLine;
  try {
    const result = await runMove({
      ...options,
      onProgress(p) {
        span.addEvent("shardkit.move.step", {
          "shardkit.move.step": p.step,
          "shardkit.move.elapsed_ms": p.elapsedMs,
          ...(p.rows !== undefined ? { "shardkit.move.rows": p.rows } : {}),
          ...(p.lagBytes !== undefined ? { "shardkit.move.lag_bytes": p.lagBytes } : {}),
        });
        progress(p);
      },
    });
    span.setAttributes({
      "shardkit.move.from": result.from,
      "shardkit.move.epoch": result.epoch,
      "shardkit.move.freeze_ms": result.freezeMs,
      "shardkit.move.resumed": result.resumed ?? "no",
    });
    span.end();
    return result;
  } catch (error) {
    if (error instanceof Error) span.recordException(error);
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    span.end();
    throw error;
  }
}

async function runMove<Client extends ShardClient>(options: MoveOptions<Client>): Promise<MoveResult> {
  const started = performance.now();
  const { map } = options;
  const shard = typeof options.shard === "string" ? ShardIdentifier.parse(options.shard) : options.shard;
  const mode = options.mode ?? "live";
  const issues = moveOptionIssues(map.registry, options.to, mode);
  if (mode === "live" && !options.sourceConnection) issues.push("sourceConnection: required for a live move");
  if (issues.length > 0) throw new OwnershipOptionsError(issues);
  const timeoutMs = options.timeoutMs ?? 120_000;
  const maxLagBytes = options.maxLagBytes ?? 64 * 1024;
  const steps: MoveResult["steps"] = [];
  const progress = options.onProgress ?? progressLine;
  let last = performance.now();
  const step = async (name: MoveStep, extra: Omit<MoveProgress, "step" | "elapsedMs"> = {}) => {
    progress({ step: name, elapsedMs: Math.round(performance.now() - started), ...extra });
  };
  const done = async (name: MoveStep) => {
    const now = performance.now();
    steps.push({ step: name, ms: Math.round(now - last) });
    last = now;
    await options.afterStep?.(name);
  };

  await map.refresh();
  const to = options.to;
  let from = map.registry.physicalOf(shard);
  const names = { publication: `shardkit_move_${shard.bits}`, subscription: `shardkit_move_${shard.bits}` };

  // A move of this shard that stopped half-way: finish it if it switched, else undo it.
  let resumed: MoveResult["resumed"] = null;
  const record = await findRecord(map.registry, shard);
  if (record) {
    await step("resume");
    const target = map.registry.physical.find((p) => map.identityOf(p) === record.row.target);
    if (!target)
      throw new OwnershipOptionsError([
        `a stopped move of shard ${shard.key} names ${record.row.target}, which is not in the registry`,
      ]);
    if (map.registry.physicalOf(shard) === target) {
      // It switched: the target owns the shard. Finish the old owner's side.
      await map.enforce(shard, record.physical); // a tombstone already recorded is left as it is
      await teardown(record.physical, target, names);
      if (options.cleanup ?? true) await map.cleanup(shard, record.physical);
      await raw(record.physical).$executeRawUnsafe(
        `DELETE FROM "${MOVE_TABLE}" WHERE shard = $1`,
        shard.bits,
      );
      resumed = "rolled-forward";
      if (target === to) {
        await done("resume");
        return {
          shard: shard.key,
          from: record.physical.name,
          to: to.name,
          epoch: map.registry.epochOf(shard),
          mode,
          rows: {},
          freezeMs: 0,
          durationMs: Math.round(performance.now() - started),
          resumed,
          steps,
        };
      }
    } else {
      await undo(map, shard, record.physical, target, names);
      resumed = "rolled-back";
    }
    await done("resume");
    await map.refresh();
    from = map.registry.physicalOf(shard);
  }
  if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);

  await step("precheck");
  const problems = await precheck(map.tables, shard, from, to, mode);
  if (problems.length > 0) throw new MovePrecheckError(shard, problems);
  // A shardkit table whose shard column is not in its replica identity (UniqueClaim: its key is the
  // claimed value) is published with the whole row as its identity, or its updates and deletes at
  // the source would fail while the publication lives. Set before anything is recorded or fenced.
  if (mode === "live") {
    for (const table of await outsideIdentity(map.tables, from)) {
      await raw(from).$executeRawUnsafe(`ALTER TABLE "${table.table}" REPLICA IDENTITY FULL`);
    }
  }
  await done("precheck");

  await raw(from).$executeRawUnsafe(
    `INSERT INTO "${MOVE_TABLE}" (shard, target, step) VALUES ($1, $2, 'copying')
     ON CONFLICT (shard) DO UPDATE SET target = EXCLUDED.target, step = 'copying', "startedAt" = now(), "updatedAt" = now()`,
    shard.bits,
    map.identityOf(to),
  );
  await step("receive");
  // Armed: the shard's writes at the source check its record from now on, so the fence is one row
  // update, with no DDL waiting for the writers of every table while the shard's writes are held.
  await map.arm(shard, to);
  await map.receive(shard, to);
  await done("receive");

  let freezeStarted = 0;
  const within = Date.now() + timeoutMs;
  /** Polls `check` every `everyMs` until it holds (short only while writes are held); a timeout undoes the move. */
  const waitFor = async (what: string, check: () => Promise<boolean>, everyMs = 50) => {
    while (!(await check())) {
      if (Date.now() > within) {
        await undo(map, shard, from, to, names);
        throw new MoveTimeoutError(shard, what, timeoutMs);
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  };

  /** The source stops taking the shard's writes: the freeze starts. */
  const fence = async () => {
    await step("fence");
    const at = performance.now();
    await map.fence(shard);
    await raw(from).$executeRawUnsafe(
      `UPDATE "${MOVE_TABLE}" SET step = 'fenced', "updatedAt" = now() WHERE shard = $1`,
      shard.bits,
    );
    await done("fence");
    return at;
  };

  if (mode === "live") {
    await step("publish");
    const filters = map.tables
      .map((t) => `"${t.table}" WHERE (${shardOfRowSql(t)} = ${shard.bits})`)
      .join(", ");
    await raw(from).$executeRawUnsafe(
      `CREATE PUBLICATION "${names.publication}" FOR TABLE ${filters} WITH (publish = 'insert, update, delete')`,
    );
    await done("publish");
    await step("subscribe");
    await raw(to).$executeRawUnsafe(
      `CREATE SUBSCRIPTION "${names.subscription}" CONNECTION ${literal(options.sourceConnection!)} PUBLICATION "${names.publication}"
       WITH (copy_data = true, synchronous_commit = 'on')`,
    );
    await done("subscribe");
    await step("copy");
    await waitFor("the initial copy", async () => {
      const [row] = await raw(to).$queryRawUnsafe<{ waiting: number }[]>(
        `SELECT count(*)::int AS waiting FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
         WHERE s.subname = $1 AND r.srsubstate <> 'r'`,
        names.subscription,
      );
      return row!.waiting === 0;
    });
    await step("copy", { rows: await countAt(map.tables, to, shard) });
    await done("copy");
    await step("catch-up");
    await waitFor("catching up", async () => {
      const lag = await lagBytes(from, names.subscription);
      await step("catch-up", { lagBytes: lag });
      return lag <= maxLagBytes;
    });
    await done("catch-up");
    freezeStarted = await fence();
    await step("final-position");
    const [position] = await raw(from).$queryRawUnsafe<{ lsn: string }[]>(
      "SELECT pg_current_wal_lsn()::text AS lsn",
    );
    await waitFor(
      "the final position",
      async () => {
        const [row] = await raw(from).$queryRawUnsafe<{ reached: boolean }[]>(
          `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) AS reached FROM pg_replication_slots WHERE slot_name = $1`,
          names.subscription,
          position!.lsn,
        );
        return row?.reached === true;
      },
      2,
    );
    await done("final-position");
  } else {
    freezeStarted = await fence();
    await step("copy");
    await copyRows(map, shard, from, to);
    await step("copy", { rows: await countAt(map.tables, to, shard) });
    await done("copy");
  }

  const rows: Record<string, number> = {};
  if (options.verify ?? true) {
    await step("verify");
    const mismatches: string[] = [];
    const [source, target] = await Promise.all([digest(map, from, shard), digest(map, to, shard)]);
    map.tables.forEach((table, i) => {
      const [a, b] = [source[i]!, target[i]!];
      rows[table.table] = b.rows;
      if (a.rows !== b.rows || a.sum !== b.sum) {
        mismatches.push(
          `${table.table}: source ${a.rows} rows (${a.sum ?? "-"}), target ${b.rows} rows (${b.sum ?? "-"})`,
        );
      }
    });
    if (mismatches.length > 0) {
      await undo(map, shard, from, to, names);
      throw new MoveVerifyError(shard, mismatches);
    }
    await done("verify");
  }

  await step("switch");
  const { epoch } = await map.switch(shard, to);
  const freezeMs = Math.round(performance.now() - freezeStarted);
  await raw(from).$executeRawUnsafe(
    `UPDATE "${MOVE_TABLE}" SET step = 'switched', "updatedAt" = now() WHERE shard = $1`,
    shard.bits,
  );
  await done("switch");
  await step("enforce");
  await map.enforce(shard, from);
  await done("enforce");
  await step("teardown");
  await teardown(from, to, names);
  await map.tidy(to);
  await done("teardown");
  if (options.cleanup ?? true) {
    await step("cleanup");
    await map.cleanup(shard, from);
    await done("cleanup");
  }
  await raw(from).$executeRawUnsafe(`DELETE FROM "${MOVE_TABLE}" WHERE shard = $1`, shard.bits);
  await step("done");
  return {
    shard: shard.key,
    from: from.name,
    to: to.name,
    epoch,
    mode,
    rows,
    freezeMs,
    durationMs: Math.round(performance.now() - started),
    resumed,
    steps,
  };
}

export interface MoveCheckOptions<Client extends ShardClient> {
  /** The registry of the databases (no `PartitionMap` needed: the check opens none). */
  registry: ShardRegistry<Client>;
  shard: ShardIdentifier | string;
  /** The database that would own the shard. */
  to: PhysicalShard<Client>;
  /** As `moveShard`'s: `live` (default) checks `wal_level` at the source too. */
  mode?: "live" | "offline";
  /**
   * The app's tables holding shard rows, as the move's map is opened with them. `@shardkit/prisma`'s
   * own tables are added as `PartitionMap.open` adds them (the same rule: `MoveCheck.tables`).
   */
  tables: readonly FencedTable[];
  /** How long each database may take to answer the read of the map. Default 2000 ms. */
  timeoutMs?: number;
}

/** What `checkMove` found: where the shard is, and what would stop `moveShard` from starting. */
export interface MoveCheck<Client extends ShardClient = ShardClient> {
  shard: ShardIdentifier;
  /** The shard's owner now, by the records (the registry's placement while it is unrecorded); null when unknown. */
  from: PhysicalShard<Client> | null;
  to: PhysicalShard<Client>;
  mode: "live" | "offline";
  /** The tables checked: the ones given, then `@shardkit/prisma`'s own that the databases have (as `PartitionMap.tables`). */
  tables: FencedTable[];
  /** The shard's placement, as `readPartitionMap` reads it. */
  placement: ShardPlacement<Client>;
  /**
   * A move of the shard that stopped half-way (recorded on its source), which `moveShard` deals
   * with first: `finish` when it had switched (the target owns the shard: the old owner's side is
   * finished), `undo` otherwise (the target's copy is discarded; the check does not count it as a
   * leftover). `step` is what it had reached: `copying`, `fenced` or `switched`. Null when there is none.
   */
  resume: { target: string; step: string; action: "finish" | "undo" } | null;
  /**
   * Every problem that would make `moveShard` refuse to start: the precheck's (`MovePrecheckError`
   * lists the same ones), records that cannot be right, a database that did not answer. Empty:
   * the move can start.
   */
  issues: string[];
}

/**
 * The checks a move runs before it changes anything (`moveShard`'s precheck, the same code), on
 * their own and without a `PartitionMap`: reads the map (`readPartitionMap`, SELECTs only) to find
 * the shard's owner, then checks that owner as the source against `to`. Nothing is changed: no
 * function installed, no record written. `OwnershipOptionsError` for options that cannot work,
 * or when `to` owns the shard already (as `moveShard`).
 */
export async function checkMove<Client extends ShardClient>(
  options: MoveCheckOptions<Client>,
): Promise<MoveCheck<Client>> {
  const mode = options?.mode ?? "live";
  const issues = [
    ...(options?.registry && Array.isArray(options.registry.physical)
      ? moveOptionIssues(options.registry, options.to, mode)
      : ["registry: required"]),
    ...listedTableIssues(options?.tables),
  ];
  let shard: ShardIdentifier | undefined;
  if (typeof options?.shard === "string") {
    try {
      shard = ShardIdentifier.parse(options.shard);
    } catch (error) {
      issues.push(`shard ${JSON.stringify(options.shard)}: ${(error as Error).message}`);
    }
  } else if (options?.shard instanceof ShardIdentifier) shard = options.shard;
  else issues.push("shard: required");
  if (shard && typeof options.registry?.has === "function" && !options.registry.has(shard))
    issues.push(`shard ${shard.key} is not in the registry`);
  if (issues.length > 0 || !shard) throw new OwnershipOptionsError(issues);
  const { registry, to } = options;
  const timeoutMs = options.timeoutMs ?? 2000;
  // Where the shard is, which tables hold its rows, and a move of it that stopped half-way: read at once.
  const [view, resolved, stopped] = await Promise.all([
    readPartitionMap(registry, { timeoutMs }),
    resolveTables(registry.physical, options.tables, { timeoutMs }),
    findRecord(registry, shard, timeoutMs),
  ]);
  const { tables } = resolved;
  const placement = view.placementOf(shard);
  const from = placement.owner ?? (placement.state === "unrecorded" ? placement.configured : null);
  // A stopped move: `moveShard` finishes it (it switched) or undoes it (it did not) before anything else.
  const stoppedTarget = stopped
    ? view.databases.find((d) => d.identity !== null && d.identity === stopped.row.target)?.physical
    : undefined;
  const resume: MoveCheck<Client>["resume"] = stopped
    ? {
        target: view.nameOf(stopped.row.target) ?? stopped.row.target,
        step: stopped.row.step,
        action: stoppedTarget !== undefined && from === stoppedTarget ? "finish" : "undo",
      }
    : null;
  const found = [...view.issues, ...resolved.issues];
  if (stopped && stoppedTarget === undefined)
    found.push(
      `a stopped move of shard ${shard.key} names ${stopped.row.target}, which is not in the registry (or did not answer)`,
    );
  // Finishing a stopped move to `to` is all `moveShard` would do: nothing else to check.
  if (resume?.action === "finish" && from === to)
    return { shard, from, to, mode, tables, placement, resume, issues: found };
  if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);
  if (from === null)
    found.push(
      `the owner of shard ${shard.key} is unknown: the databases holding its records did not answer`,
    );
  const silent = (physical: PhysicalShard<Client>) =>
    view.databases.some((d) => d.physical === physical && d.status === "unavailable");
  for (const db of view.databases) {
    if (db.status === "unavailable" && (from === null || db.physical === from || db.physical === to))
      found.push(`${db.database}: did not answer (${db.error})`);
    if (db.status === "no-table" && (db.physical === from || db.physical === to))
      found.push(
        `${db.database}: has no ShardOwnership table (roll @shardkit/ownership's schema/ownership.prisma out to it)`,
      );
  }
  if (from !== null && !silent(from) && !silent(to))
    found.push(
      ...(await precheck(tables, shard, from, to, mode, resume?.action === "undo" && stoppedTarget === to)),
    );
  return { shard, from, to, mode, tables, placement, resume, issues: found };
}

/** What is wrong with a move's `to` and `mode` (shared by `moveShard` and `checkMove`). */
function moveOptionIssues<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  to: PhysicalShard<Client> | undefined,
  mode: unknown,
): string[] {
  const issues: string[] = [];
  if (mode !== "live" && mode !== "offline")
    issues.push(`mode: expected 'live' or 'offline', got ${JSON.stringify(mode)}`);
  if (!to || !registry.physical.includes(to)) issues.push("to: not a database of the map's registry");
  return issues;
}

/**
 * Everything that must hold before a move of `shard` from `from` to `to` starts (`moveShard` runs
 * it, and `checkMove` on its own): every problem, nothing changed (it only reads).
 */
async function precheck<Client extends ShardClient>(
  tables: readonly FencedTable[],
  shard: ShardIdentifier,
  from: PhysicalShard<Client>,
  to: PhysicalShard<Client>,
  mode: "live" | "offline",
  /** The target's copy of the shard is a stopped move's, which `moveShard` discards before this check. */
  copyDiscarded = false,
): Promise<string[]> {
  const issues: string[] = [];
  // shardkit's own tables that either side has must move with the shard (a map opened while a
  // database did not answer decided its tables without that database).
  const [ownAtSource, ownAtTarget] = await Promise.all([shardkitTablesAt(from), shardkitTablesAt(to)]);
  for (const own of SHARDKIT_TABLES) {
    if (tables.some((t) => t.table === own.table)) continue;
    const at = [ownAtSource.has(own.table) ? from.name : null, ownAtTarget.has(own.table) ? to.name : null];
    const having = at.filter((n) => n !== null);
    if (having.length > 0)
      issues.push(
        `${own.table}: ${having.join(" and ")} ${having.length === 1 ? "has" : "have"} it, but it is not among the tables moved (reopen the map with every database answering)`,
      );
  }
  if (mode === "live") {
    const [wal] = await raw(from).$queryRawUnsafe<{ level: string }[]>(
      "SELECT current_setting('wal_level') AS level",
    );
    if (wal!.level !== "logical")
      issues.push(
        `${from.name}: wal_level is ${wal!.level}; a live move needs wal_level = logical (or use mode: 'offline')`,
      );
  }
  const COLUMNS = `SELECT table_name AS "table", column_name AS "column", data_type AS type, is_nullable AS nullable,
      coalesce(column_default, '') AS "default", is_identity AS identity
    FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ANY($1::text[])
    ORDER BY table_name, ordinal_position`;
  const names = tables.map((t) => t.table);
  type Column = {
    table: string;
    column: string;
    type: string;
    nullable: string;
    default: string;
    identity: string;
  };
  const [source, target] = await Promise.all([
    raw(from).$queryRawUnsafe<Column[]>(COLUMNS, names),
    raw(to).$queryRawUnsafe<Column[]>(COLUMNS, names),
  ]);
  // The row checks below read only the tables that exist where they look.
  const atTarget: FencedTable[] = [];
  const onBoth: FencedTable[] = [];
  for (const table of tables) {
    const at = (list: Column[]) =>
      list
        .filter((c) => c.table === table.table)
        .map((c) => `${c.column} ${c.type}${c.nullable === "NO" ? " not null" : ""}`);
    const [a, b] = [at(source), at(target)];
    if (b.length > 0) atTarget.push(table);
    if (a.length > 0 && b.length > 0) onBoth.push(table);
    if (a.length === 0) issues.push(`${from.name}: table ${table.table} does not exist`);
    else if (b.length === 0)
      issues.push(`${to.name}: table ${table.table} does not exist (roll the schema out to it first)`);
    else if (a.join(", ") !== b.join(", "))
      issues.push(
        `${table.table}: the target's columns (${b.join(", ")}) differ from the source's (${a.join(", ")})`,
      );
    for (const c of source.filter((c) => c.table === table.table)) {
      if (c.identity === "YES" || c.default.startsWith("nextval(")) {
        issues.push(
          `${table.table}.${c.column}: takes its values from a sequence, and sequences do not move with a shard`,
        );
      }
    }
  }
  // A live move's row filter column must be in the replica identity, or every UPDATE and DELETE on
  // the source would fail. shardkit's own tables are given a full identity by the move itself.
  if (mode === "live") {
    for (const table of await outsideIdentity(tables, from)) {
      if (shardkitTable(table.table)) continue;
      issues.push(
        `${table.table}: ${table.column} is not in its replica identity (its primary key); updates and deletes could not replicate`,
      );
    }
  }
  const leftovers = copyDiscarded ? 0 : await countAt(atTarget, to, shard);
  if (leftovers > 0)
    issues.push(
      `${to.name}: already holds ${leftovers} rows of shard ${shard.key} (a leftover copy: remove it first)`,
    );
  // Unique values of the shard's rows that a row of another shard at the target already holds (the
  // shard's own rows there are a leftover copy, reported above).
  for (const table of onBoth) {
    const uniques = await raw(from).$queryRawUnsafe<{ columns: string[] }[]>(
      `SELECT array_agg(a.attname::text ORDER BY k.ord) AS columns
       FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
       WHERE i.indrelid = to_regclass(quote_ident($1)) AND i.indisunique
       GROUP BY i.indexrelid, i.indisprimary
       HAVING NOT i.indisprimary OR NOT ($2 = ANY(array_agg(a.attname::text)))`,
      table.table,
      table.column,
    );
    for (const { columns } of uniques) {
      const list = columns.map((c) => `"${c}"`).join(", ");
      const values = await raw(from).$queryRawUnsafe<{ v: string }[]>(
        `SELECT json_agg(json_build_array(${list}))::text AS v FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1`,
        shard.bits,
      );
      const json = values[0]?.v;
      if (!json) continue;
      const [clash] = await raw(to).$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM "${table.table}" t, json_array_elements($1::json) v
         WHERE ${columns.map((c, i) => `t."${c}"::text = v->>${i}`).join(" AND ")}
           AND ${shardOfRowSql(table, "t")} <> $2`,
        json,
        shard.bits,
      );
      if (clash!.n > 0)
        issues.push(
          `${table.table} (${columns.join(", ")}): ${clash!.n} of the shard's values already exist at ${to.name}`,
        );
    }
  }
  return issues;
}

/**
 * The tables of `tables` whose shard column is not in their replica identity at `database` (its
 * primary key, or the index it names), and whose identity is not the full row.
 */
async function outsideIdentity<Client extends ShardClient>(
  tables: readonly FencedTable[],
  database: PhysicalShard<Client>,
): Promise<FencedTable[]> {
  const outside: FencedTable[] = [];
  for (const table of tables) {
    const [identity] = await raw(database).$queryRawUnsafe<{ replident: string; inkey: boolean }[]>(
      `SELECT c.relreplident::text AS replident,
         coalesce(bool_or(a.attname = $2), false) AS inkey
       FROM pg_class c
       LEFT JOIN pg_index i ON i.indrelid = c.oid AND (CASE WHEN c.relreplident = 'i' THEN i.indisreplident ELSE i.indisprimary END)
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
       WHERE c.oid = to_regclass(quote_ident($1)) GROUP BY c.relreplident`,
      table.table,
      table.column,
    );
    if (identity && identity.replident !== "f" && !identity.inkey) outside.push(table);
  }
  return outside;
}

/** Rows of `shard` that `database` holds, over every table. */
async function countAt<Client extends ShardClient>(
  tables: readonly FencedTable[],
  database: PhysicalShard<Client>,
  shard: ShardIdentifier,
) {
  let total = 0;
  for (const table of tables) {
    const [row] = await raw(database).$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1`,
      shard.bits,
    );
    total += row!.n;
  }
  return total;
}

/** Per table of the map, in its order: the shard's row count and an order-independent checksum, in one query. */
async function digest<Client extends ShardClient>(
  map: PartitionMap<Client>,
  database: PhysicalShard<Client>,
  shard: ShardIdentifier,
) {
  // An order-free checksum: the sum of a 64-bit hash of each row's JSON (no sort, one pass).
  const parts = map.tables.map(
    (table, i) =>
      `SELECT ${i} AS i, count(*)::int AS rows, sum(hashtextextended(row_to_json(t)::text, 7301))::text AS sum
       FROM "${table.table}" t WHERE ${shardOfRowSql(table)} = $1`,
  );
  const found = await raw(database).$queryRawUnsafe<{ i: number; rows: number; sum: string | null }[]>(
    parts.join(" UNION ALL "),
    shard.bits,
  );
  return map.tables.map((_, i) => found.find((r) => r.i === i)!);
}

/** The offline copy: every row of the shard, table by table, in batches, as the mover. */
async function copyRows<Client extends ShardClient>(
  map: PartitionMap<Client>,
  shard: ShardIdentifier,
  from: PhysicalShard<Client>,
  to: PhysicalShard<Client>,
) {
  for (const table of map.tables) {
    const rows = await raw(from).$queryRawUnsafe<{ batch: string }[]>(
      `SELECT json_agg(row_to_json(t))::text AS batch FROM (
         SELECT *, (row_number() OVER ()) / 1000 AS part FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1) t GROUP BY part`,
      shard.bits,
    );
    for (const { batch } of rows) {
      await map.asMover(to, (tx: Raw) =>
        tx.$executeRawUnsafe(
          `INSERT INTO "${table.table}" SELECT * FROM json_populate_recordset(NULL::"${table.table}", $1::json)`,
          batch,
        ),
      );
    }
  }
}

/** Bytes of WAL the subscription's slot is behind the source. */
async function lagBytes<Client extends ShardClient>(
  from: PhysicalShard<Client>,
  slot: string,
): Promise<number> {
  const [row] = await raw(from).$queryRawUnsafe<{ lag: number | null }[]>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::float8 AS lag FROM pg_replication_slots WHERE slot_name = $1`,
    slot,
  );
  return row?.lag ?? Number.POSITIVE_INFINITY;
}

/** Drops the subscription (and with it its slot on the source) and the publication, where they exist. */
async function teardown<Client extends ShardClient>(
  from: PhysicalShard<Client>,
  to: PhysicalShard<Client>,
  names: { publication: string; subscription: string },
) {
  const [sub] = await raw(to).$queryRawUnsafe<{ n: number }[]>(
    "SELECT count(*)::int AS n FROM pg_subscription WHERE subname = $1",
    names.subscription,
  );
  if (sub!.n > 0) await raw(to).$executeRawUnsafe(`DROP SUBSCRIPTION "${names.subscription}"`);
  // A slot left behind (its subscription dropped without it) still holds WAL on the source.
  await raw(from).$queryRawUnsafe(
    `SELECT pg_drop_replication_slot(slot_name)::text AS dropped FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`,
    names.subscription,
  );
  await raw(from).$executeRawUnsafe(`DROP PUBLICATION IF EXISTS "${names.publication}"`);
}

/** Undoes a move that did not switch: replication torn down, the copy discarded, the source owns the shard again. */
async function undo<Client extends ShardClient>(
  map: PartitionMap<Client>,
  shard: ShardIdentifier,
  from: PhysicalShard<Client>,
  to: PhysicalShard<Client>,
  names: { publication: string; subscription: string },
) {
  await teardown(from, to, names);
  await map.discard(shard, to);
  await map.refresh();
  const [own] = await raw(from).$queryRawUnsafe<{ state: string; peer: string | null }[]>(
    `SELECT state, peer FROM "ShardOwnership" WHERE shard = $1`,
    shard.bits,
  );
  if (own?.state === "fenced" || (own?.state === "owned" && own.peer !== null)) await map.unfence(shard);
  await raw(from).$executeRawUnsafe(`DELETE FROM "${MOVE_TABLE}" WHERE shard = $1`, shard.bits);
}

/** The database holding a record of a stopped move of `shard`, with the record. */
async function findRecord<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  shard: ShardIdentifier,
  /** How long each database may take (none: as long as it takes); one that fails or takes longer records nothing. */
  timeoutMs?: number,
) {
  const answers = await scatter(
    registry.physical,
    (physical) =>
      raw(physical).$queryRawUnsafe<{ target: string; step: string }[]>(
        `SELECT target, step FROM "${MOVE_TABLE}" WHERE shard = $1`,
        shard.bits,
      ),
    {
      policy: "partial",
      key: (p) => String(p.index),
      ...(timeoutMs !== undefined ? { targetTimeoutMs: timeoutMs } : {}),
    },
  );
  for (const outcome of answers.outcomes) {
    if (outcome.status === "fulfilled" && outcome.value[0])
      return { physical: outcome.target, row: outcome.value[0] };
  }
  return undefined;
}

function progressLine(p: MoveProgress): void {
  const extra =
    p.rows !== undefined
      ? ` (${p.rows} rows)`
      : p.lagBytes !== undefined
        ? ` (${p.lagBytes} bytes behind)`
        : "";
  process.stderr.write(`move: ${p.step}${extra} at ${p.elapsedMs} ms\n`);
}
