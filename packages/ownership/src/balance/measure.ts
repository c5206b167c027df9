// What a balance run plans from: each logical shard's load (the windows routers flushed, on every
// database: a shard's windows stay where they were written), its size, and where the records place it.
import {
  type Database,
  readShardLoad,
  type ShardClient,
  type ShardLoadSummary,
  type ShardRegistry,
  summarizeLoad,
  type TopKey,
} from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { lastLine } from "../raw.js";
import { measureShardSizes } from "../sizes.js";
import type { FencedTable } from "../sql.js";
import { SHARDKIT_TABLES } from "../tables.js";
import { readPartitionMap } from "../view.js";
import type { BalancePlacement, ShardLoads } from "./types.js";

/** What a shard's load is measured by: time its calls spent in the database, calls, or writes (each per second). */
export type LoadMeasure = "time" | "calls" | "writes";

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

/** A measurement: the load and placement `planBalance` takes, or why there is none. */
export interface Measurement {
  /**
   * Where each shard was moved away from, by the tombstones (`moved` records) the databases keep:
   * `planBalance`'s `recentMoves`, so a balance never sends a shard back where it came from.
   */
  recent: { shard: string; from: string }[];
  problems: string[];
  shards: MeasuredShard[];
  loads: ShardLoads;
  placement: BalancePlacement;
}

/** Each shard's load and size, where the records place it. */
export async function measure<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  tables: readonly FencedTable[],
  options: {
    by: LoadMeasure;
    windowMs: number;
    timeoutMs: number;
    sizeTimeoutMs: number;
    drain: Database<Client> | undefined;
  },
): Promise<Measurement> {
  const problems: string[] = [];
  const own = SHARDKIT_TABLES.filter((t) => !tables.some((u) => u.table === t.table));
  const [view, windows, sizes] = await Promise.all([
    readPartitionMap(registry, { timeoutMs: options.timeoutMs }),
    readLoad(registry.databases, options.windowMs, options.timeoutMs),
    measureShardSizes(registry, { tables: [...tables, ...own], timeoutMs: options.sizeTimeoutMs }),
  ]);
  problems.push(...view.issues);
  for (const d of view.databases)
    if (d.status === "unavailable") problems.push(`${d.database} did not answer: ${d.error}`);
  for (const d of windows.unanswered) problems.push(`${d.database}: its load could not be read: ${d.error}`);
  for (const d of sizes.unanswered)
    problems.push(`${d.database}: its shards' sizes could not be read: ${d.error}`);
  const summaries = summarizeLoad(windows.windows);
  const configs = new Set(summaries.flatMap((s) => s.configs));
  if (configs.size > 1) {
    const mixed = summaries.filter((s) => s.mixedConfigs).map((s) => s.key);
    problems.push(
      `load windows come from routers with ${configs.size} different shard configurations (${[...configs].join(", ")}${mixed.length > 0 ? `; shards ${mixed.join(", ")} were counted under several` : ""}): give every router the same configuration, or wait until the old one's windows are older than the window measured`,
    );
  }
  const byKey = new Map<string, ShardLoadSummary>(summaries.map((s) => [s.key, s]));
  const seconds = options.windowMs / 1000;
  const placement: {
    databases: BalancePlacement["databases"];
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
  for (const p of view.shards) {
    const key = p.shard.key;
    if (p.movingTo !== null)
      problems.push(`shard ${key} is moving to ${p.movingTo}: wait for that move to end`);
    const owner = p.owner ?? (p.state === "unrecorded" ? p.configured : null);
    if (!owner) {
      problems.push(`shard ${key}: where it lives is unknown (${p.state})`);
      continue;
    }
    for (const r of p.records) if (r.state === "moved") recent.push({ shard: key, from: r.database });
    const s = byKey.get(key);
    const size = { rows: 0, bytes: 0 };
    for (const z of sizes.sizes)
      if (z.shard.bits === p.shard.bits && z.database === owner.name) {
        size.rows += z.rows;
        size.bytes += z.bytes;
      }
    const figure = !s ? 0 : options.by === "time" ? s.dbMs : options.by === "calls" ? s.calls : s.writes;
    const load = figure / seconds;
    loads[key] = { load, ...size };
    placement.shards.push({ shard: key, database: owner.name });
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
  return { problems, shards, loads, placement, recent };
}

/** The load windows of the last `windowMs` on every database; those that did not answer, apart. */
export async function readLoad<Client extends ShardClient>(
  databases: readonly Database<Client>[],
  windowMs: number,
  timeoutMs: number,
) {
  const result = await scatter(
    databases,
    (d) => readShardLoad(d.client as unknown as Parameters<typeof readShardLoad>[0], { sinceMs: windowMs }),
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (d) => String(d.index), abortable: false },
  );
  return {
    windows: result.values.flat(),
    unanswered: result.missing.map((m) => ({
      database: m.target.name,
      error: m.reason === "timeout" ? `no answer in ${timeoutMs} ms` : lastLine(m.error),
    })),
  };
}
