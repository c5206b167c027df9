// What a balance run plans from: each logical shard's load (the windows routers flushed, on every
// database: a shard's windows stay where they were written), its size, and where the records place it.
import {
  type Database,
  type LoadMeasure,
  type LoadSum,
  loadFigure,
  mergeShardLoad,
  type ShardClient,
  type ShardLoadSummary,
  type ShardRegistry,
  sumShardLoad,
  type TopKey,
} from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { lastLine, raw } from "../raw.js";
import { measureShardSizes } from "../sizes.js";
import type { FencedTable } from "../sql.js";
import { SHARDKIT_TABLES } from "../tables.js";
import { readPartitionMap } from "../view.js";
import type { BalanceFleet, ShardLoads } from "./types.js";

export type { LoadMeasure };

/** A shard as the run measured it. */
export interface MeasuredShard {
  shard: string;
  database: string;
  /** The figure balanced (`by`, per second). */
  load: number;
  calls: number;
  writes: number;
  /** Time in the database (ms) over the window. */
  dbMs: number;
  p99Ms: number | null;
  /** Its heaviest routing keys over the window (hashes unless the routers keep plain keys). */
  top: TopKey[];
  rows: number;
  bytes: number;
}

/** A measurement: the load and fleet `planBalance` takes, or why there is none. */
export interface Measurement {
  /**
   * Where shards were moved away from in the last `RECENT_LEFT_MS` (the `moved` records, their
   * tombstones): `planBalance`'s `recentMoves`, so a balance does not send a shard straight back.
   */
  recent: { shard: string; from: string }[];
  problems: string[];
  shards: MeasuredShard[];
  loads: ShardLoads;
  fleet: BalanceFleet;
  /** Each shard's size, by shard key: measured once per run (a full scan), kept for the next measures. */
  sizes: Map<string, { rows: number; bytes: number }>;
}

/** How long a shard is not planned back onto a database it left. */
export const RECENT_LEFT_MS = 24 * 60 * 60 * 1000;

const RECENT_LEFT_SQL = `SELECT shard FROM "ShardOwnership" WHERE state = 'moved'
  AND "updatedAt" > now() - $1::float8 * interval '1 millisecond'`;

/**
 * Each shard's load and size, where the records place it. `sizes`: those of an earlier measure of
 * the same run (a shard's size does not change by moving it), else measured here.
 * Longer than 80 lines: the fleet's load read once, then each figure the planner needs, in order.
 */
export async function measure<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  tables: readonly FencedTable[],
  options: {
    by: LoadMeasure;
    windowMs: number;
    timeoutMs: number;
    sizeTimeoutMs: number;
    drain: Database<Client> | undefined;
    sizes?: Measurement["sizes"] | undefined;
  },
): Promise<Measurement> {
  const problems: string[] = [];
  const own = SHARDKIT_TABLES.filter((t) => !tables.some((u) => u.table === t.table));
  const [view, load, measured, left] = await Promise.all([
    readPartitionMap(registry, { timeoutMs: options.timeoutMs }),
    sumLoad(registry.databases, options.windowMs, options.timeoutMs),
    options.sizes
      ? undefined
      : measureShardSizes(registry, { tables: [...tables, ...own], timeoutMs: options.sizeTimeoutMs }),
    recentlyLeft(registry.databases, options.timeoutMs),
  ]);
  problems.push(...view.issues);
  for (const d of view.databases)
    if (d.status === "unavailable") problems.push(`${d.database} did not answer: ${d.error}`);
  for (const d of load.unanswered) problems.push(`${d.database}: its load could not be read: ${d.error}`);
  for (const d of measured?.unanswered ?? [])
    problems.push(`${d.database}: its shards' sizes could not be read: ${d.error}`);
  // Windows as long as the window measured cannot say how the load is spread within it.
  const typical = median(load.sums.flatMap((s) => (s.typicalWindowMs === null ? [] : [s.typicalWindowMs])));
  if (typical !== undefined && typical * 2 > options.windowMs)
    problems.push(
      `the window measured (${options.windowMs} ms) is shorter than two of the routers' load windows (${typical} ms): measure over a longer window`,
    );
  const summaries = load.summaries;
  const configs = new Set(summaries.flatMap((s) => s.configs));
  if (configs.size > 1) {
    const mixed = summaries.filter((s) => s.mixedConfigs).map((s) => s.key);
    problems.push(
      `load windows come from routers with ${configs.size} different shard configurations (${[...configs].join(", ")}${mixed.length > 0 ? `; shards ${mixed.join(", ")} were counted under several` : ""}): give every router the same configuration, or wait until the old one's windows are older than the window measured`,
    );
  }
  const byKey = new Map<string, ShardLoadSummary>(summaries.map((s) => [s.key, s]));
  const fleet: {
    databases: BalanceFleet["databases"];
    shards: { shard: string; database: string }[];
  } = {
    databases: registry.databases.map((d) => ({
      name: d.name,
      labels: d.labels,
      ...(d === options.drain ? { draining: true } : {}),
    })),
    shards: [],
  };
  const loads: Record<string, { load: number; bytes: number; rows: number }> = {};
  const shards: MeasuredShard[] = [];
  const recent: Measurement["recent"] = [];
  const sizes: Measurement["sizes"] = options.sizes ?? new Map();
  const stopped = new Map(view.stopped.map((m) => [m.shard.key, m]));
  for (const p of view.shards) {
    const key = p.shard.key;
    const halted = stopped.get(key);
    if (halted)
      problems.push(
        `a move of shard ${key} to ${halted.to} stopped half-way (${halted.step}, its lease lapsed): a balance run (not a dry run) takes it over and finishes or undoes it, as does \`shardkit move ${key} --to ${halted.to}\``,
      );
    else if (p.movingTo !== null)
      problems.push(`shard ${key} is moving to ${p.movingTo}: wait for that move to end`);
    const owner = p.owner ?? (p.state === "unrecorded" ? p.configured : null);
    if (!owner) {
      problems.push(`shard ${key}: where it lives is unknown (${p.state})`);
      continue;
    }
    for (const database of left.get(p.shard.bits) ?? []) recent.push({ shard: key, from: database });
    if (!options.sizes) {
      const size = { rows: 0, bytes: 0 };
      for (const z of measured!.sizes)
        if (z.shard.bits === p.shard.bits && z.database === owner.name) {
          size.rows += z.rows;
          size.bytes += z.bytes;
        }
      sizes.set(key, size);
    }
    const size = sizes.get(key) ?? { rows: 0, bytes: 0 };
    const s = byKey.get(key);
    const load = s ? loadFigure(options.by, s, options.windowMs) : 0;
    loads[key] = { load, ...size };
    fleet.shards.push({ shard: key, database: owner.name });
    shards.push({
      shard: key,
      database: owner.name,
      load,
      calls: s?.calls ?? 0,
      writes: s?.writes ?? 0,
      dbMs: s?.dbMs ?? 0,
      p99Ms: s?.p99 ?? null,
      top: s?.top ?? [],
      ...size,
    });
  }
  return { problems, shards, loads, fleet, recent, sizes };
}

/**
 * Each shard's load over the last `spanMs` of each database's clock, summed in each database
 * (`sumShardLoad`: the windows across the span's edges counted for their part inside) and merged
 * (`mergeShardLoad`: a shard's windows stay where they were written); the databases that did not
 * answer, apart.
 */
export async function sumLoad<Client extends ShardClient>(
  databases: readonly Database<Client>[],
  spanMs: number,
  timeoutMs: number,
) {
  const result = await scatter(
    databases,
    (d) => sumShardLoad(d.client as unknown as Parameters<typeof sumShardLoad>[0], { spanMs }),
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (d) => String(d.index), abortable: false },
  );
  const sums: LoadSum[] = result.values;
  return {
    sums,
    summaries: mergeShardLoad(sums),
    unanswered: result.missing.map((m) => ({
      database: m.target.name,
      error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
    })),
  };
}

function median(values: number[]): number | undefined {
  const sorted = values.sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)];
}

/** By shard bits, the databases each shard was moved off in the last `RECENT_LEFT_MS`. */
async function recentlyLeft<Client extends ShardClient>(
  databases: readonly Database<Client>[],
  timeoutMs: number,
): Promise<Map<number, string[]>> {
  const result = await scatter(
    databases,
    async (d) => {
      try {
        const rows = await raw(d).$queryRawUnsafe<{ shard: number }[]>(RECENT_LEFT_SQL, RECENT_LEFT_MS);
        return rows.map((r) => ({ bits: Number(r.shard), database: d.name }));
      } catch {
        return []; // no ShardOwnership table: it records no shard
      }
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (d) => String(d.index), abortable: false },
  );
  const left = new Map<number, string[]>();
  for (const { bits, database } of result.values.flat())
    left.set(bits, [...(left.get(bits) ?? []), database]);
  return left;
}
