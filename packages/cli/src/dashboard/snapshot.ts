// A snapshot of the dashboard, assembled from the last answer of each piece the collector reads
// (collect.ts): each shard's place, state and load; each database's health, outbox and load over
// time; moves under way and ended; what is wrong, most serious first; the plan as the page draws it.
// Pure: it reads nothing, so the page's figures follow from what was read, and nothing else.

import type {
  BalanceRun,
  FencedTable,
  LoadMeasure,
  MoveJournalEntry,
  PartitionView,
} from "@shardkit/ownership";
import {
  type Database,
  describeSkew,
  LOAD_UNITS,
  type LoadSum,
  loadCount,
  loadFigure,
  mergeShardLoad,
  type OutboxLag,
  type ShardRegistry,
  skewedRouters,
} from "@shardkit/prisma";
import type { RawClient } from "../config.js";
import type { Names } from "./names.js";
import type {
  DashboardDatabase,
  DashboardMove,
  DashboardMoveEnded,
  DashboardPlan,
  DashboardProblem,
  DashboardRun,
  DashboardShard,
  DashboardSnapshot,
} from "./types.js";

export const HISTORY = 50;
export const TOP_KEYS = 5;

/** The length of a bucket of each database's series: about 30 over the load shown. */
export const seriesBucketMs = (windowMs: number) => Math.max(1000, Math.round(windowMs / 30));

/** What the dashboard reads, how often, and how a balance started from it runs. */
export interface CollectSettings {
  /** How often each piece is read again and a snapshot sent (ms). */
  refreshMs: number;
  /** The load shown: the windows of the last `windowMs`. */
  windowMs: number;
  by: LoadMeasure;
  /** How long each database may take to answer each read (ms). */
  timeoutMs: number;
  /** The app's tables holding shard rows (for the balancer's sizes and its moves). */
  tables: FencedTable[];
  /** How a balance or drain started from the page moves shards. */
  mode: "live" | "offline";
  allowActions: boolean;
}

/** One database's last probe. */
export interface Probe {
  up: boolean | null;
  error?: string;
  latencyMs: number | null;
  answeredAt: Date | null;
  connections: DashboardDatabase["connections"];
}

/** What the collector read last, and how: the input of a snapshot. */
export interface Pieces {
  registry: ShardRegistry<RawClient>;
  names: Names;
  settings: CollectSettings;
  /** Where the configuration came from. */
  source: string;
  seq: number;
  probes: ReadonlyMap<Database<RawClient>, Probe>;
  view: PartitionView<RawClient> | null;
  viewError: string | null;
  lag: OutboxLag[] | null;
  /** Each database's load over the load shown, summed there (`sumShardLoad`, with its series). */
  loads: ReadonlyMap<Database<RawClient>, LoadSum>;
  loadErrors: ReadonlyMap<Database<RawClient>, string>;
  journal: MoveJournalEntry[];
  plan: DashboardPlan | null;
  run: DashboardRun | null;
  /** The time of the snapshot (ms since the epoch): the load shown ends there. */
  now: number;
}

/** A date as ISO 8601; null for none, or one that is no date (a record holding `infinity`). */
function iso(date: Date | null | undefined): string | null {
  return date && Number.isFinite(date.getTime()) ? date.toISOString() : null;
}

/**
 * The snapshot the page receives, from the last answer of each piece.
 * Longer than 80 lines: one pure pass from the pieces read to the page's snapshot.
 */
export function assembleSnapshot(input: Pieces): DashboardSnapshot {
  const { registry } = input;
  const { names, settings } = input;
  const { now } = input;

  // Load per shard, over every database's sum of the window.
  const since = now - settings.windowMs;
  const sums = [...input.loads.values()];
  const summaries = new Map(mergeShardLoad(sums, TOP_KEYS).map((s) => [s.key, s]));
  const loadOf = (key: string) => {
    const s = summaries.get(key);
    return s ? loadFigure(settings.by, s, settings.windowMs) : 0;
  };
  const hottest = Math.max(0, ...registry.shards.map((s) => loadOf(s.key)));
  const total = registry.shards.reduce((sum, s) => sum + loadOf(s.key), 0);

  const view = input.view;
  const placements = new Map(view?.shards.map((p) => [p.shard.key, p]) ?? []);
  const shards: DashboardShard[] = registry.shards.map((shard) => {
    const p = placements.get(shard.key);
    const s = summaries.get(shard.key);
    // Unrecorded (no partition map opened yet): the configuration's placement holds. Unknown (its
    // owner did not answer): where the registry routes it, the last place the records named.
    const owner = p ? (p.owner ?? p.configured) : registry.databaseOf(shard);
    const load = loadOf(shard.key);
    const state: DashboardShard["state"] = !p
      ? "unknown"
      : p.state === "owned" && p.movingTo
        ? "moving"
        : p.state;
    const violates = owner ? registry.placement.allows(shard, owner) : undefined;
    return {
      key: shard.key,
      database: owner ? names.of(owner) : null,
      state,
      epoch: p?.epoch ?? null,
      movingTo: p?.movingTo ? input.names.show(p.movingTo) : null,
      load,
      heat: hottest > 0 ? load / hottest : 0,
      calls: s?.calls ?? 0,
      writes: s?.writes ?? 0,
      p99Ms: s?.p99 ?? null,
      top: (s?.top ?? []).slice(0, TOP_KEYS).map((t) => ({
        key: t.key,
        share: s && s.calls > 0 ? t.count / s.calls : 0,
      })),
      ...(violates !== undefined ? { violates } : {}),
    };
  });

  const bucketMs = seriesBucketMs(settings.windowMs);
  const lagOf = new Map(input.lag?.map((l) => [l.database, l]) ?? []);
  // Each database's shards, in one pass over the shards.
  const shardsOf = new Map<string | null, DashboardShard[]>();
  for (const s of shards) {
    const list = shardsOf.get(s.database);
    if (list) list.push(s);
    else shardsOf.set(s.database, [s]);
  }
  const databases: DashboardDatabase[] = registry.databases.map((physical) => {
    const probe = input.probes.get(physical)!;
    const name = names.of(physical);
    const buckets = Math.ceil(settings.windowMs / bucketMs);
    const first = Math.floor(since / bucketMs);
    const t = Array.from({ length: buckets + 1 }, (_, i) => (first + i) * bucketMs);
    const v = t.map(() => 0);
    // Each bucket's figure, as the database summed it (each window spread over the buckets it covers).
    for (const b of input.loads.get(physical)?.series ?? []) {
      const i = b.bucket - first;
      if (i >= 0 && i < v.length) v[i] = loadCount(settings.by, b) / (bucketMs / 1000);
    }
    const own = shardsOf.get(name) ?? [];
    const load = own.reduce((sum, s) => sum + s.load, 0);
    const lag = lagOf.get(physical.name);
    const up = probe.up === true;
    return {
      name,
      labels: { ...physical.labels },
      up,
      ...(!up ? { error: probe.error ?? "not probed yet" } : {}),
      latencyMs: probe.latencyMs,
      answeredAt: probe.answeredAt?.toISOString() ?? null,
      connections: probe.connections,
      pool: physical.pool ?? null,
      outbox: {
        pending: lag?.pending ?? null,
        oldestPendingMs: lag?.oldestPendingMs ?? null,
        dead: lag?.dead ?? null,
      },
      load,
      share: total > 0 ? load / total : 0,
      series: { t, v: v.map((x) => Math.round(x * 100) / 100) },
      shards: own.map((s) => s.key),
    };
  });

  const moves: DashboardMove[] = (view?.databases ?? []).flatMap((d) =>
    d.moves.map((m) => {
      const entry = input.journal.find((e) => e.shard === m.shard.key && e.attempt === m.attempt);
      const mode = entry?.mode ?? null;
      return {
        shard: m.shard.key,
        from: names.of(d.physical),
        to: input.names.show(m.to),
        mode,
        step: entry?.step ?? m.step,
        stepIndex: entry ? entry.stepIndex + 1 : 0,
        steps: entry?.steps ?? 0,
        rows: entry?.rows ?? null,
        rowsTotal: null,
        lagBytes: entry?.lagBytes ?? null,
        holder: m.holder,
        startedAt: iso(entry?.startedAt),
        live: m.live,
      };
    }),
  );

  const history: DashboardMoveEnded[] = input.journal
    .filter((e) => e.outcome !== null && iso(e.endedAt) !== null)
    .sort((a, b) => b.endedAt!.getTime() - a.endedAt!.getTime())
    .slice(0, HISTORY)
    .map((e) => ({
      shard: e.shard,
      from: input.names.show(e.from),
      to: input.names.show(e.to),
      outcome: e.outcome!,
      mode: e.mode,
      freezeMs: e.freezeMs,
      durationMs: e.durationMs,
      rows: e.rows,
      endedAt: iso(e.endedAt)!,
      ...(e.error ? { error: names.clean(e.error) } : {}),
    }));

  return {
    at: new Date(now).toISOString(),
    seq: input.seq,
    config: input.source === "SHARDKIT_SHARDS" ? "SHARDKIT_SHARDS" : input.source.split(/[\\/]/).at(-1)!,
    windowMs: settings.windowMs,
    by: settings.by,
    unit: LOAD_UNITS[settings.by],
    actions: settings.allowActions,
    problems: problemsOf(
      input,
      databases,
      shards,
      summaries.size > 0 ? [...summaries.values()].some((s) => s.mixedConfigs) : false,
    ),
    databases,
    shards,
    moves,
    history,
    plan: input.plan,
    run: input.run,
  };
}

/** What is wrong, most serious first. */
function problemsOf(
  input: Pieces,
  databases: DashboardDatabase[],
  shards: DashboardShard[],
  mixedConfigs: boolean,
): DashboardProblem[] {
  const { names } = input;
  const problems: DashboardProblem[] = [];
  for (const d of databases)
    if (!d.up)
      problems.push({
        level: "error",
        kind: "down",
        database: d.name,
        text: `${d.name} does not answer (${d.error}): its shards ${d.shards.join(", ") || "(none)"} are unavailable`,
      });
  if (input.viewError)
    problems.push({
      level: "error",
      kind: "records",
      text: `the ownership records could not be read: ${input.viewError}`,
    });
  for (const issue of input.view?.issues ?? [])
    problems.push({ level: "error", kind: "records", text: names.clean(issue) });
  for (const d of input.view?.databases ?? [])
    for (const m of d.moves)
      if (!m.live)
        problems.push({
          level: "error",
          kind: "stopped-move",
          shard: m.shard.key,
          text: `the move of ${m.shard.key} to ${input.names.show(m.to)} stopped at ${m.step}: the next \`shardkit move\` of the shard finishes or undoes it`,
        });
  for (const s of shards)
    if (s.violates)
      problems.push({
        level: "error",
        kind: "placement",
        shard: s.key,
        text: `shard ${s.key} is on ${s.database}, which breaks a placement rule: ${s.violates}`,
      });
  for (const o of input.view?.leftovers ?? [])
    problems.push({
      level: "warning",
      kind: "leftover",
      database: input.names.show(o.database),
      text: `${input.names.show(o.database)}: ${o.kind} ${o.name} is held by no move${o.walBytes !== undefined ? ` and holds ${o.walBytes} bytes of WAL` : ""}: the next \`shardkit move\` of its shard drops it`,
    });
  for (const d of databases)
    if (d.outbox.dead)
      problems.push({
        level: "warning",
        kind: "dead-letters",
        database: d.name,
        text: `${d.name}: ${d.outbox.dead} dead letter${d.outbox.dead === 1 ? "" : "s"} (\`shardkit redrive\` puts them back to pending)`,
      });
  for (const [physical, error] of input.loadErrors)
    if (input.probes.get(physical)?.up)
      problems.push({
        level: "warning",
        kind: "load",
        database: names.of(physical),
        text: `the load recorded on ${names.of(physical)} could not be read: ${error}`,
      });
  for (const r of skewedRouters([...input.loads.values()]))
    problems.push({
      level: "warning",
      kind: "clock",
      text: `${describeSkew(r)}: its load is counted by the database's clock, but its own timestamps are off (set its clock right, e.g. with NTP)`,
    });
  if (mixedConfigs)
    problems.push({
      level: "warning",
      kind: "load",
      text: "routers recorded load under different configurations: some run with another list of databases or shards",
    });
  for (const p of input.plan?.problems ?? [])
    problems.push({ level: "warning", kind: "plan", text: `the balancer could not plan: ${p}` });
  return problems;
}

export function planOf(names: Names, run: BalanceRun, measuredAt: Date): DashboardPlan {
  const plan = run.plan;
  const at = measuredAt.toISOString();
  const problems = run.problems.map((p) => names.clean(p));
  if (!plan)
    return {
      at,
      reason: names.clean(run.reason),
      stale: null,
      stoppedBy: run.stoppedBy,
      moves: [],
      databases: [],
      hot: [],
      skipped: [],
      problems,
    };
  const after = new Map(plan.after.databases.map((d) => [d.name, d]));
  return {
    at,
    reason: names.clean(plan.reason),
    stale: null,
    stoppedBy: plan.stoppedBy,
    moves: plan.moves.map((m) => ({
      shard: m.shard,
      from: names.show(m.from),
      to: names.show(m.to),
      kind: m.kind,
      reason: names.clean(m.reason),
      load: m.load,
      bytes: m.bytes,
      before: m.before,
      after: m.after,
    })),
    databases: plan.before.databases.map((d) => ({
      name: names.show(d.name),
      before: d.perCapacity,
      after: after.get(d.name)?.perCapacity ?? d.perCapacity,
      ratioBefore: d.ratio,
      ratioAfter: after.get(d.name)?.ratio ?? d.ratio,
    })),
    hot: plan.hot.map((h) => ({
      ...h,
      database: names.show(h.database),
      reason: names.clean(h.reason),
    })),
    skipped: plan.skipped.map((s) => ({ shard: s.shard, reason: names.clean(s.reason) })),
    problems,
  };
}
