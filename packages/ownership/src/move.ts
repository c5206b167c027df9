// `moveShard`: its options and result, its span (OpenTelemetry), and the runner that takes the lease
// and runs a move's steps in order. Beside it: the precheck (check.ts), the step tables (steps.ts),
// the move's deadlines and the databases it must hear from (move-bounds.ts), and what a failed or
// stopped move leaves and how it is finished or undone (move-recover.ts).
import { SpanStatusCode, type TracerProvider, trace } from "@opentelemetry/api";
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRef } from "@shardkit/prisma";
import { toShard } from "@shardkit/prisma/internal";
import { moveOptionIssues, outsideIdentity, precheck } from "./check.js";
import { MovePrecheckError, MoveTimeoutError, OwnershipOptionsError, PlacementRuleError } from "./errors.js";
import { endStoppedMove, MoveJournalWriter } from "./journal.js";
import { ShardLease } from "./lease.js";
import { type LeaseOptions, takeLease } from "./lease-take.js";
import type { PartitionMap } from "./map.js";
import { MoveClock, needAnswers } from "./move-bounds.js";
import { failed, resume } from "./move-recover.js";
import { bounded, unbounded } from "./raw.js";
import { findMoves, inProgress, isLive } from "./records.js";
import { type MoveProgress, type MoveRun, type MoveStep, moveSteps, stepsOf } from "./steps.js";

export { type MoveProgress, type MoveStep, moveSteps };

/** How long a live move may hold the shard's writes, fence to switch, by default (ms). */
const DEFAULT_FREEZE_BUDGET_MS = 10_000;

export interface MoveOptions<Client extends ShardClient> extends LeaseOptions {
  map: PartitionMap<Client>;
  shard: ShardRef;
  /** The database that will own the shard (a spare, or one that holds other shards). */
  to: Database<Client>;
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
  /**
   * Compare each table's rows by checksum, source against target, besides their counts. Default
   * true. `false` skips the checksums only: row counts are still compared, and the switch still
   * takes only a copy this move checked, from a source this move fenced.
   */
  verify?: boolean;
  /** Delete the old copy at the source after the switch (batched; the tombstone stays). Default true. */
  cleanup?: boolean;
  /**
   * How long a live move's copy, catch-up and check may take before the move gives up and is undone
   * (`MoveTimeoutError`). Default 120 s. It counts from the publication, so it bounds the making of
   * the replication slots too, which waits for every open transaction of the source's server: the
   * error then names those transactions (or the server that did not say in another `copyTimeoutMs`).
   * It bounds each other statement outside the freeze (checks, preparation, switch, teardown and its
   * waits, cleanup, undo, resume): a database late for it fails the move with `MoveTimeoutError`.
   */
  copyTimeoutMs?: number;
  /**
   * How long the shard's writes may wait, from the fence to the switch, before the move gives up and
   * is undone (`MoveTimeoutError`); the lease is never extended past it while the shard is fenced, so
   * a mover stuck or dead inside its fence holds writes no longer than this (or the lease, if
   * shorter) before routers give the shard back. Default: 10 s for a live move, `copyTimeoutMs` for
   * an offline one (it copies inside its fence).
   */
  freezeBudgetMs?: number;
  /** WAL the target may be behind before the fence (catch-up is done). Default 64 KiB. */
  maxLagBytes?: number;
  /** Each step as it starts. Default: a line per step on stderr. */
  onProgress?(progress: MoveProgress): void;
  /**
   * Called as each step completes, and awaited: a test's way to pause a move there (as a slow host
   * would) or stop it (as a crash would).
   */
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
  /** Rows of the shard per table at the fence, as checked at the target. */
  rows: Record<string, number>;
  /** How long writes to the shard were held: from the fence to the switch. */
  freezeMs: number;
  durationMs: number;
  /** A move that had stopped half-way, taken over and rolled back or forward before this one. */
  resumed: "rolled-back" | "rolled-forward" | null;
  /** The rows written during the move, checked again inside the fence (live moves). */
  changedRows: number;
  steps: { step: MoveStep; ms: number }[];
}

/**
 * Moves one logical shard to another database while it takes writes (PostgreSQL logical
 * replication), or offline (fence, copy, verify, switch; the way for PGlite):
 *
 * precheck -> lease (one mover per shard) -> receive (the source arms the shard, the target fences
 * the incoming shard) -> publish (row-filtered on the shard bits) -> subscribe (initial copy) ->
 * catch-up -> verify (every row not written since the arming, in a snapshot of each side) -> fence
 * -> final position -> verify-changes (the rows written during the move) -> switch (decided at the
 * source, then the target owns it) -> teardown -> cleanup (the old copy, batched) -> done.
 *
 * The move holds a lease on the shard (`ShardLease`): a second mover is refused while it is live,
 * and every step checks it in the transaction of its change, so a mover that lost it (it lapsed,
 * and another mover took the move over, or a router gave the fenced shard back to its owner) can
 * change nothing more. A move that stopped half-way is taken over by the next `moveShard` of the
 * shard once its lease has lapsed, and finished (it had switched) or undone (it had not); a move to
 * the stopped move's source undoes it (moving the shard back if it had switched) and ends. At every
 * point exactly one database accepts the shard's writes, or none, for at most the lease, between
 * the fence and the switch. A failure says where, what it left, and what a rerun does
 * (`MoveFailedError`). A target whose labels break a placement rule of the registry for the shard's
 * group is refused first (`PlacementRuleError`), before any database is read.
 */
export async function moveShard<Client extends ShardClient>(
  options: MoveOptions<Client>,
): Promise<MoveResult> {
  if (options.telemetry === false) return runMove(options);
  const provider = typeof options.telemetry === "object" ? options.telemetry.tracerProvider : undefined;
  const tracer = (provider ?? trace).getTracer("@shardkit/ownership", "0.1.0");
  const shardKey = typeof options.shard === "string" ? options.shard : keyOf(options.shard);
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
  const { map } = options;
  const mode = options.mode ?? "live";
  const issues = map?.registry ? moveOptionIssues(map.registry, options.to, mode) : ["map: required"];
  if (mode === "live" && !options.sourceConnection) issues.push("sourceConnection: required for a live move");
  const copyTimeoutMs = options.copyTimeoutMs ?? 120_000;
  if (!(Number.isFinite(copyTimeoutMs) && copyTimeoutMs > 0))
    issues.push(`copyTimeoutMs: expected a positive number of ms, got ${copyTimeoutMs}`);
  const freezeBudgetMs =
    options.freezeBudgetMs ?? (mode === "live" ? DEFAULT_FREEZE_BUDGET_MS : copyTimeoutMs);
  if (!(Number.isFinite(freezeBudgetMs) && freezeBudgetMs > 0))
    issues.push(`freezeBudgetMs: expected a positive number of ms, got ${freezeBudgetMs}`);
  let shard: ShardIdentifier | undefined;
  try {
    shard = options.shard === undefined ? undefined : toShard(options.shard);
  } catch (error) {
    issues.push(`shard ${JSON.stringify(options.shard)}: ${(error as Error).message}`);
  }
  if (shard && map?.registry && !map.registry.has(shard))
    issues.push(`shard ${shard.key} is not in the registry`);
  if (issues.length > 0 || !shard) throw new OwnershipOptionsError(issues);
  // The registry's placement rules, before any database is read or written: a move never puts a
  // shard where its group may not live.
  const rule = map.registry.placement.allows(shard, options.to);
  if (rule !== undefined) throw new PlacementRuleError(shard, options.to.name, rule);
  const moving = shard;
  const clock = new MoveClock(moving);
  try {
    return await bounded(clock, () =>
      moveWithin(options, map, moving, mode, copyTimeoutMs, freezeBudgetMs, clock),
    );
  } finally {
    // The move's changes are announced to the routers as each commits; a mover (a command) that
    // ends right after still makes its last announcement first.
    await map.announce();
  }
}

/**
 * The runner: stopped moves of the shard taken over and resumed, the precheck, the lease, then each step in order.
 * Longer than 80 lines: the move's steps and their undo, under one lease, in order.
 */
async function moveWithin<Client extends ShardClient>(
  options: MoveOptions<Client>,
  map: PartitionMap<Client>,
  shard: ShardIdentifier,
  mode: "live" | "offline",
  copyTimeoutMs: number,
  freezeBudgetMs: number,
  clock: MoveClock,
): Promise<MoveResult> {
  const started = performance.now();
  const to = options.to;
  const lease: LeaseOptions = {
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.holder !== undefined ? { holder: options.holder } : {}),
  };
  const steps: MoveResult["steps"] = [];
  const progress = options.onProgress ?? progressLine;
  let last = performance.now();
  let current: MoveStep = "precheck";
  let journal: MoveJournalWriter<Client> | undefined; // from the lease on (journal.ts): never waited for but at the end
  const step = (name: MoveStep, extra: Omit<MoveProgress, "step" | "elapsedMs"> = {}) => {
    current = name;
    journal?.report(name, extra);
    // The caller's code runs outside the move's deadline (a statement it sends is its own).
    unbounded(() => progress({ step: name, elapsedMs: Math.round(performance.now() - started), ...extra }));
  };
  const done = async (name: MoveStep) => {
    const now = performance.now();
    steps.push({ step: name, ms: Math.round(now - last) });
    last = now;
    await unbounded(() => options.afterStep?.(name));
  };

  // The map as it is now, and every move of the shard the databases record: waited for, database by
  // database, up to the map's timeoutMs; a database the move needs that does not answer stops it.
  await map.refresh();
  const moves = await findMoves(map.registry, shard, map.timeoutMs);
  needAnswers(map, shard, to, moves.unanswered);

  // A move of this shard under way (its lease is live) refuses this one; a stopped one (its lease
  // lapsed) is taken over and finished if it switched, else undone.
  let resumed: MoveResult["resumed"] = null;
  const live = moves.found.find(isLive);
  if (live) throw inProgress(map, live);
  for (const record of moves.found) {
    step("resume");
    clock.phase("resuming a stopped move", copyTimeoutMs);
    const held = await ShardLease.takeOver(map, record, lease);
    held.start();
    let stopped: { error: unknown } | undefined;
    try {
      resumed = await resume(map, held, options.cleanup ?? true, copyTimeoutMs);
    } catch (error) {
      stopped = { error };
    } finally {
      held.stop();
    }
    await endStoppedMove(held, stopped ?? resumed!, copyTimeoutMs); // its journal row, if it has one
    if (stopped) throw stopped.error;
    await done("resume");
    await map.refresh();
    // Where the caller wants the shard once the stopped move is finished (its target) or undone
    // (its source, e.g. a target a placement rule forbids now): nothing more to do.
    const settled =
      resumed === "rolled-forward" ? held.to === to : resumed === "rolled-back" && held.from === to;
    if (settled && map.registry.databaseOf(shard) === to) {
      return {
        shard: shard.key,
        from: held.from.name,
        to: to.name,
        epoch: map.registry.epochOf(shard),
        mode,
        rows: {},
        freezeMs: 0,
        durationMs: Math.round(performance.now() - started),
        resumed,
        changedRows: 0,
        steps,
      };
    }
  }
  const from = map.registry.databaseOf(shard);
  if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);

  step("precheck");
  clock.phase("the move's checks", copyTimeoutMs);
  const problems = await precheck(map.tables, shard, from, to, mode);
  if (problems.length > 0) throw new MovePrecheckError(shard, problems);
  // A shardkit table whose shard column is not in its replica identity (UniqueClaim: its key is the
  // claimed value) is published with the whole row as its identity, or its updates and deletes at
  // the source would fail while the publication lives. Set before anything is recorded or fenced.
  if (mode === "live") {
    for (const table of await outsideIdentity(map.tables, from)) {
      await map.changes.ddl(from, table.table, (tx) =>
        tx.$executeRawUnsafe(`ALTER TABLE "${table.table}" REPLICA IDENTITY FULL`),
      );
    }
  }
  await done("precheck");

  step("lease");
  // From the lease on, a failure goes through `failed`: undone, or it says what it left.
  clock.phase("the move's preparation", copyTimeoutMs);
  const held = ShardLease.of(map, shard, await takeLease(map, shard, to, lease));
  // A live move's freeze is row updates and a check of the rows written during the move: it stops
  // (undone) rather than hold writes for longer than its budget. An offline move copies inside it.
  held.freezeBudget = freezeBudgetMs;
  held.start();
  journal = new MoveJournalWriter(held, { mode, cleanup: options.cleanup ?? true, started, copyTimeoutMs });
  journal.report("lease");

  let copyStarted: number | undefined;
  const move: MoveRun<Client> = {
    map,
    shard,
    from,
    to,
    held,
    sums: options.verify ?? true,
    sourceConnection: options.sourceConnection,
    maxLagBytes: options.maxLagBytes ?? 64 * 1024,
    copyTimeoutMs,
    phase: (what, budgetMs, options) => clock.phase(what, budgetMs, options),
    progress: (extra) => step(current, extra),
    startCopy() {
      copyStarted = performance.now();
      clock.phase("the copy", copyTimeoutMs, { total: { from: copyStarted } });
    },
    copyTimeout(what) {
      if (copyStarted !== undefined && performance.now() > copyStarted + copyTimeoutMs)
        throw new MoveTimeoutError(shard, what, copyTimeoutMs);
    },
    freezeTimeout(what) {
      if (held.frozenFor() > held.freezeBudget) throw new MoveTimeoutError(shard, what, held.freezeBudget);
    },
    rows: {},
    freezeStarted: 0,
    changedRows: 0,
    epoch: 0,
    freezeMs: 0,
    decided: false,
  };
  let failure: { error: unknown } | undefined;
  try {
    await done("lease");
    for (const next of stepsOf(mode, { cleanup: options.cleanup ?? true })) {
      if (next.decides) {
        // Writes have waited since the fence: a mover slower than its lease stops here (undone: the
        // source takes them again) rather than switch; its lease is not renewed past that (`start`).
        move.freezeTimeout("the freeze (fence to switch)");
        await held.verified();
      }
      step(next.name);
      await next.run(move);
      await done(next.name);
    }
    await held.release();
  } catch (error) {
    clock.phase(move.decided ? "reading the switch" : "undoing the move", copyTimeoutMs);
    const undone = failed(held, shard, current, error, move.decided, copyTimeoutMs);
    failure = { error: await undone.catch((e: unknown) => e) };
  } finally {
    held.stop();
  }
  const durationMs = Math.round(performance.now() - started);
  await journal.finish(failure ?? move, durationMs);
  if (failure) throw failure.error;
  step("done");
  const { epoch, rows, freezeMs, changedRows } = move;
  return {
    shard: shard.key,
    from: from.name,
    to: to.name,
    epoch,
    mode,
    rows,
    freezeMs,
    durationMs,
    resumed,
    changedRows,
    steps,
  };
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

/** A shard reference's key for a span, or the reference as given when it names no shard. */
function keyOf(ref: ShardRef | undefined): string | undefined {
  try {
    return ref === undefined ? undefined : toShard(ref).key;
  } catch {
    return JSON.stringify(ref);
  }
}
