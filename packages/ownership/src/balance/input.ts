// The input of `planBalance`, checked (every problem named by its field, then one BalanceInputError)
// and put in the order the planner works in: databases by name, shards by their bits, so that the
// plan depends on the figures only, never on the order they were listed in.
import { ShardIdentifier } from "@shardkit/id";
import type { PlacementCheck } from "@shardkit/prisma";
import { BalanceInputError, type BalanceInputIssue } from "../errors.js";
import type { BalanceFleet, BalanceOptions, ShardLoads } from "./types.js";

export interface Db {
  name: string;
  labels: Readonly<Record<string, string>>;
  draining: boolean;
  capacity: number;
}

export interface Shard {
  key: string;
  id: ShardIdentifier;
  load: number;
  bytes: number;
  /** Index in `Model.dbs` of its database. */
  db: number;
}

export interface Settings {
  threshold: number;
  minImprovement: number;
  maxMoves: number;
  maxBytes: number;
  allows: PlacementCheck | undefined;
  /** Databases each shard left recently (by shard key): it is not moved back to them. */
  left: Map<string, Set<string>>;
  secondary: "bytes" | "none";
  drainOnly: boolean;
}

export interface Model {
  dbs: Db[];
  shards: Shard[];
  settings: Settings;
  /** Shard keys measured but not placed: their load is not counted. */
  unplaced: string[];
}

const DEFAULTS = { threshold: 0.1, minImprovement: 0.02, maxMoves: 4, maxBytes: Number.POSITIVE_INFINITY };

/** The checked model of `planBalance`'s input; throws `BalanceInputError` naming every bad field. */
export function readInput(load: ShardLoads, fleet: BalanceFleet, options: BalanceOptions = {}): Model {
  const issues: BalanceInputIssue[] = [];
  const bad = (field: string, problem: string) => issues.push({ field, problem });
  const settings = readSettings(options, bad);

  const dbs: Db[] = [];
  const databases = Array.isArray(fleet?.databases) ? fleet.databases : [];
  if (!Array.isArray(fleet?.databases)) bad("fleet.databases", "must be an array");
  for (const [i, d] of databases.entries()) {
    const field = `fleet.databases[${i}]`;
    if (typeof d?.name !== "string" || d.name === "") {
      bad(`${field}.name`, "must be a non-empty string");
      continue;
    }
    if (dbs.some((o) => o.name === d.name)) {
      bad(`${field}.name`, `${JSON.stringify(d.name)} is listed twice`);
      continue;
    }
    const capacity = d.capacity ?? 1;
    if (typeof capacity !== "number" || !Number.isFinite(capacity) || capacity <= 0)
      bad(`${field}.capacity`, `must be a finite number > 0, got ${String(capacity)}`);
    dbs.push({ name: d.name, labels: d.labels ?? {}, draining: d.draining === true, capacity });
  }
  dbs.sort((a, b) => compare(a.name, b.name));
  const dbIndex = new Map(dbs.map((d, i) => [d.name, i]));

  const figures = new Map<string, { load: number; bytes: number }>();
  for (const [key, figure] of Object.entries(load ?? {})) {
    const field = `load[${JSON.stringify(key)}]`;
    if (!isShardKey(key)) {
      bad(field, 'is not a shard key ("group/member")');
      continue;
    }
    const value = figure?.load;
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0)
      bad(`${field}.load`, `must be a finite number >= 0, got ${String(value)}`);
    for (const extra of ["bytes", "rows"] as const) {
      const v = figure?.[extra];
      if (v !== undefined && (typeof v !== "number" || !Number.isFinite(v) || v < 0))
        bad(`${field}.${extra}`, `must be a finite number >= 0 when given, got ${String(v)}`);
    }
    figures.set(key, { load: value, bytes: figure?.bytes ?? 0 });
  }

  const shards: Shard[] = [];
  const placed = new Set<string>();
  const list = Array.isArray(fleet?.shards) ? fleet.shards : [];
  if (!Array.isArray(fleet?.shards)) bad("fleet.shards", "must be an array");
  for (const [i, s] of list.entries()) {
    const field = `fleet.shards[${i}]`;
    if (!isShardKey(s?.shard)) {
      bad(`${field}.shard`, `${JSON.stringify(s?.shard)} is not a shard key ("group/member")`);
      continue;
    }
    const id = ShardIdentifier.parse(s.shard);
    if (placed.has(id.key)) {
      bad(`${field}.shard`, `shard ${id.key} is placed twice`);
      continue;
    }
    placed.add(id.key);
    const db = dbIndex.get(s.database);
    if (db === undefined) {
      bad(`${field}.database`, `${JSON.stringify(s.database)} is not in fleet.databases`);
      continue;
    }
    const f = figures.get(id.key);
    shards.push({ key: id.key, id, load: f?.load ?? 0, bytes: f?.bytes ?? 0, db });
  }
  if (issues.length > 0) throw new BalanceInputError(issues);
  shards.sort((a, b) => a.id.bits - b.id.bits);
  const unplaced = [...figures.keys()].filter((k) => !placed.has(ShardIdentifier.parse(k).key)).sort();
  return { dbs, shards, settings, unplaced };
}

function readSettings(options: BalanceOptions, bad: (field: string, problem: string) => void): Settings {
  const o = options ?? {};
  const threshold = o.threshold ?? DEFAULTS.threshold;
  if (!inRange(threshold, 0, 10))
    bad("options.threshold", `must be a number 0..10, got ${String(threshold)}`);
  const minImprovement = o.minImprovement ?? DEFAULTS.minImprovement;
  if (!inRange(minImprovement, 0, 1))
    bad("options.minImprovement", `must be a number 0..1, got ${String(minImprovement)}`);
  const maxMoves = o.maxMoves ?? DEFAULTS.maxMoves;
  if (!(maxMoves === Number.POSITIVE_INFINITY || (Number.isInteger(maxMoves) && maxMoves >= 0)))
    bad("options.maxMoves", `must be an integer >= 0 (or Infinity), got ${String(maxMoves)}`);
  const maxBytes = o.maxBytes ?? DEFAULTS.maxBytes;
  if (typeof maxBytes !== "number" || Number.isNaN(maxBytes) || maxBytes < 0)
    bad("options.maxBytes", `must be a number >= 0, got ${String(maxBytes)}`);
  if (o.allows !== undefined && typeof o.allows !== "function") bad("options.allows", "must be a function");
  const left = new Map<string, Set<string>>();
  if (o.recentMoves !== undefined && !Array.isArray(o.recentMoves))
    bad("options.recentMoves", "must be an array");
  for (const [i, m] of (Array.isArray(o.recentMoves) ? o.recentMoves : []).entries()) {
    if (!isShardKey(m?.shard) || typeof m.from !== "string") {
      bad(`options.recentMoves[${i}]`, "must be { shard: a shard key, from: a database name }");
      continue;
    }
    const key = ShardIdentifier.parse(m.shard).key;
    left.set(key, (left.get(key) ?? new Set()).add(m.from));
  }
  const secondary = o.secondary ?? "bytes";
  if (secondary !== "bytes" && secondary !== "none")
    bad("options.secondary", `must be "bytes" or "none", got ${String(secondary)}`);
  if (o.drainOnly !== undefined && typeof o.drainOnly !== "boolean")
    bad("options.drainOnly", `must be a boolean, got ${String(o.drainOnly)}`);
  const drainOnly = o.drainOnly === true;
  return { threshold, minImprovement, maxMoves, maxBytes, allows: o.allows, left, secondary, drainOnly };
}

const inRange = (v: unknown, lo: number, hi: number) =>
  typeof v === "number" && Number.isFinite(v) && v >= lo && v <= hi;

const KEY = /^(0|[1-9]\d{0,2})\/(0|[1-9]\d?)$/;

/** A well-formed, in-range shard key (what `ShardIdentifier.parse` accepts), checked without throwing. */
function isShardKey(key: unknown): key is string {
  const m = typeof key === "string" ? KEY.exec(key) : null;
  return m !== null && Number(m[1]) <= 255 && Number(m[2]) <= 63;
}

/** Code-unit order: the same everywhere, unlike `localeCompare`. */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
