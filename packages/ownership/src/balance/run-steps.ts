// The pieces of a balance run around its plan: the moves it makes (`runMove`, through `moveShard`),
// the stopped moves it takes over first (`takeOverStopped`), and whether a drain is done (`drained`,
// from where the records place the shards once the run is over: `placedNow`).
import type { ShardClient } from "@shardkit/prisma";
import { PartitionMap } from "../map.js";
import { type MoveProgress, moveShard } from "../move.js";
import { lastLine } from "../raw.js";
import { readPartitionMap } from "../view.js";
import type { BalanceLease } from "./lease.js";
import type { Measurement } from "./measure.js";
import { waitForCalm } from "./pause.js";
import type { BalanceMoveDone, BalanceRun, RunBalanceOptions } from "./run-types.js";
import type { BalanceMove } from "./types.js";

/** Why a run stops before its next move (`beforeMove`), or why its takeovers stopped it. */
export interface RunStop {
  stoppedBy: "interrupted" | "p99" | "lease-lost" | "max-moves" | "failed";
  reason: string;
}

/**
 * What is checked before each move of a run, a takeover's too: the run's signal, the p99 guard
 * (`maxP99Ms`: waits while another shard is hot, stops when the pause outlasts `maxPauseMs`), and
 * the fleet's lease, renewed right before the move (a run whose lease lapsed and was taken by
 * another run starts no other move). `made`: the moves made so far, for the reason.
 */
export async function beforeMove<Client extends ShardClient>(
  options: RunBalanceOptions<Client>,
  lease: BalanceLease | undefined,
  shard: string,
  made: number,
  timeoutMs: number,
): Promise<RunStop | undefined> {
  const interrupted = `interrupted after ${plural(made, "move")}: run it again to go on`;
  if (options.signal?.aborted) return { stoppedBy: "interrupted", reason: interrupted };
  if (options.maxP99Ms !== undefined) {
    const calm = await waitForCalm(
      options.registry,
      shard,
      { ...options, onPause: (pause) => options.onEvent?.({ type: "pause", ...pause }) },
      timeoutMs,
    );
    if (calm === "aborted") return { stoppedBy: "interrupted", reason: interrupted };
    if (calm !== true) return { stoppedBy: "p99", reason: calm };
  }
  const lost = await lease?.renew().catch((error: unknown) => `it could not be renewed: ${lastLine(error)}`);
  if (lost)
    return {
      stoppedBy: "lease-lost",
      reason: `stopped after ${plural(made, "move")}, before the next: this run lost the fleet's balance lease (${lost})`,
    };
  return undefined;
}

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * Takes over every move the records show stopped (its lease lapsed: its balancer or mover died),
 * one at a time, each made through `moveShard`: finished to its target, or undone (the shard kept
 * on, or moved back to, its source) when the target may no longer have it (a placement rule
 * forbids it now, or it is the database being drained). Each counts against `limit` (maxMoves) and
 * goes through `beforeMove` (signal, p99 guard, lease); the first that fails stops the run.
 */
export async function takeOverStopped<Client extends ShardClient>(
  options: RunBalanceOptions<Client>,
  lease: BalanceLease,
  limit: number,
  timeoutMs: number,
): Promise<{ moves: BalanceMoveDone[]; stop?: RunStop }> {
  const { registry } = options;
  const view = await readPartitionMap(registry, { timeoutMs });
  const stopped = view.stopped.filter((s) => registry.databases.some((d) => d.name === s.to));
  const moves: BalanceMoveDone[] = [];
  if (stopped.length === 0) return { moves };
  const map = options.map ?? (await PartitionMap.open({ registry, tables: options.tables, timeoutMs }));
  try {
    for (const s of stopped) {
      if (moves.length >= limit)
        return {
          moves,
          stop: {
            stoppedBy: "max-moves",
            reason: `${plural(moves.length, "stopped move")} taken over (maxMoves), ${stopped.length - moves.length} left: run it again to go on`,
          },
        };
      const stop = await beforeMove(options, lease, s.shard.key, moves.length, timeoutMs);
      if (stop) return { moves, stop };
      const index = moves.length;
      const target = registry.databases.find((d) => d.name === s.to)!;
      const forbidden =
        registry.placement.allows(s.shard, target) ??
        (target === options.drain ? `${s.to} is being drained` : undefined);
      const what = `a move of ${s.shard.key} from ${s.database} to ${s.to}, stopped at ${s.step} by ${s.holder} (its lease lapsed)`;
      const next = forbidden
        ? {
            to: s.database,
            undone: forbidden,
            reason: `${what}: undone, ${s.shard.key} kept on (or moved back to) ${s.database}, as ${s.to} may not hold it now (${forbidden})`,
          }
        : { to: s.to, reason: `${what}: taken over and made` };
      const planned = {
        shard: s.shard.key,
        from: s.database,
        to: next.to,
        kind: "takeover" as const,
        reason: next.reason,
      };
      options.onEvent?.({ type: "move", index, ...planned });
      const move = await runMove(map, planned, options, (progress) =>
        options.onEvent?.({ type: "step", index, shard: planned.shard, progress }),
      );
      moves.push(next.undone ? { ...move, undone: next.undone } : move);
      if (move.status === "failed")
        return {
          moves,
          stop: {
            stoppedBy: "failed",
            reason: `the stopped move of ${s.shard.key} to ${s.to}, taken over${next.undone ? " to be undone" : ""}, failed: ${move.error}`,
          },
        };
      options.onEvent?.({
        type: "moved",
        index,
        shard: planned.shard,
        durationMs: move.durationMs,
        freezeMs: move.freezeMs,
      });
    }
  } finally {
    if (!options.map) map.close();
  }
  return { moves };
}

/** Where each shard of the map's registry is (database name by shard key), or why that is unknown. */
export type Placed = Map<string, string> | { unknown: string };

export async function placedNow<Client extends ShardClient>(map: PartitionMap<Client>): Promise<Placed> {
  try {
    await map.refresh();
    return new Map(map.registry.shards.map((s) => [s.key, map.registry.databaseOf(s).name]));
  } catch (error) {
    return { unknown: `where the shards are now could not be read: ${lastLine(error)}` };
  }
}

/**
 * A drain is done, and its report `ok`, exactly when the database holds no shard: after a run, as
 * the records say then (`placed`); for a dry run, once its plan is made. Whatever stopped it (a
 * shard no rule lets go elsewhere, a limit, Ctrl-C, a failed move), it is not `ok` while a shard is
 * left there, naming each, so `drain && decommission` never decommissions a database that holds data.
 */
export function drained(report: BalanceRun, m: Measurement, placed?: Placed): BalanceRun {
  if (report.drain === null) return report;
  if (placed && !(placed instanceof Map))
    return { ...report, ok: false, reason: `${report.reason}; the drain may not be done: ${placed.unknown}` };
  // Without a map read after the moves (a dry run, or no move made): the measurement, and the plan.
  const moved = new Map((report.dryRun ? (report.plan?.moves ?? []) : []).map((mv) => [mv.shard, mv.to]));
  const where: [string, string][] = placed
    ? [...placed]
    : m.shards.map((s) => [s.shard, moved.get(s.shard) ?? s.database]);
  const left = where.filter(([, db]) => db === report.drain).map(([shard]) => shard);
  if (left.length === 0) return { ...report, ok: true };
  const skipped = report.plan?.skipped.filter((s) => left.includes(s.shard)) ?? [];
  return {
    ...report,
    ok: false,
    reason: `${report.reason}; the drain is not done: ${report.drain} still holds ${left.join(", ")}${
      skipped.length > 0 ? ` (${skipped.map((s) => `${s.shard}: ${s.reason}`).join("; ")})` : ""
    }`,
  };
}

/** Runs one planned move through `moveShard`; a failure is reported, not thrown. */
export async function runMove<Client extends ShardClient>(
  map: PartitionMap<Client>,
  next: Pick<BalanceMove, "shard" | "from" | "to" | "reason"> & { kind: BalanceMoveDone["kind"] },
  options: RunBalanceOptions<Client>,
  onProgress: (progress: MoveProgress) => void,
): Promise<BalanceMoveDone> {
  const { registry } = options;
  const mode = options.mode ?? "live";
  const to = registry.databases.find((d) => d.name === next.to)!;
  const shard = registry.shards.find((s) => s.key === next.shard)!;
  const started = Date.now();
  const base = { shard: next.shard, from: next.from, to: next.to, kind: next.kind, reason: next.reason };
  const failed = (error: string, extra: { halfDone?: true } = {}) => ({
    ...base,
    status: "failed" as const,
    durationMs: Date.now() - started,
    freezeMs: 0,
    epoch: null,
    error,
    ...extra,
  });
  try {
    // The plan was made from what the records said then; another mover (a second balance, a person)
    // may have moved the shard since: move it only from where the plan has it.
    await map.refresh();
    const from = registry.databaseOf(shard);
    // A stopped move taken over: wherever the records have it (its source, or its target once switched).
    if (from.name !== next.from && next.kind !== "takeover")
      return failed(
        `shard ${next.shard} is on ${from.name} now, not on ${next.from} as planned (another mover moved it): nothing was changed`,
      );
    // A takeover undone after its switch moves the shard back from where the records have it now.
    const source =
      next.kind === "takeover" && from !== to
        ? from
        : (registry.databases.find((d) => d.name === next.from) ?? from);
    const result = await moveShard({
      map,
      shard,
      to,
      mode,
      ...(mode === "live" ? { sourceConnection: options.sourceConnection!(source) } : {}),
      ...(options.verify !== undefined ? { verify: options.verify } : {}),
      ...(options.cleanup !== undefined ? { cleanup: options.cleanup } : {}),
      ...(options.copyTimeoutMs !== undefined ? { copyTimeoutMs: options.copyTimeoutMs } : {}),
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(options.freezeBudgetMs !== undefined ? { freezeBudgetMs: options.freezeBudgetMs } : {}),
      onProgress,
    });
    return {
      ...base,
      from: result.from,
      status: "moved",
      durationMs: result.durationMs,
      freezeMs: result.freezeMs,
      epoch: result.epoch,
    };
  } catch (error) {
    return failed(
      lastLine(error),
      (error as { left?: unknown })?.left === "half-done" ? { halfDone: true } : {},
    );
  }
}
