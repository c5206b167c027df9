// The runner's first step: a plan, which names logical shards, placed on the databases that hold
// them when it runs. The same plan placed again after a move lands at the shards' new databases.
import type { ShardIdentifier } from "@shardkit/id";
import type { Obj, Plan, PlanTarget, Spread } from "./plan.js";
import type { ShardLayout } from "./planner.js";

/**
 * A plan placed where its shards are now: how it runs (`shard`: its one shard's database;
 * `database`: one statement on one database, whose answer is the answer; `scatter`: a read merged
 * over its statements; `split`: a write over several databases, run only in `$action`) and its
 * statements, one per database.
 */
export interface Placed {
  shape: "shard" | "database" | "scatter" | "split";
  targets: PlanTarget[];
}

/** Places `plan` (see `Placed`); `args` are the call's, run as they are by a one-shard plan without its own. */
export function place(plan: Exclude<Plan, { kind: "refuse" }>, layout: ShardLayout, args?: unknown): Placed {
  if (plan.kind === "shard") {
    const database = layout.databaseOf(plan.shard).index;
    return {
      shape: "shard",
      targets: [{ database, shards: [plan.shard], args: (plan.args ?? args ?? {}) as Obj }],
    };
  }
  const targets = targetsOf(plan.spread, layout);
  const shape = plan.read ? "scatter" : targets.length === 1 ? "database" : plan.write ? "split" : "scatter";
  return { shape, targets };
}

/**
 * Where a plan's shards are now: one statement per database holding some of them, in database
 * order, with the call's args cut to those shards. The runner's step between a plan and the
 * databases; the same plan placed again after a move lands at the shards' new databases.
 */
function targetsOf(spread: Spread, layout: ShardLayout): PlanTarget[] {
  const every = everyDatabase(spread, layout);
  if (every) return every;
  const byDatabase = new Map<number, ShardIdentifier[]>();
  for (const shard of spread.shards) {
    const database = layout.databaseOf(shard).index;
    const shards = byDatabase.get(database);
    if (shards) shards.push(shard);
    else byDatabase.set(database, [shard]);
  }
  return [...byDatabase]
    .sort(([x], [y]) => x - y)
    .map(([database, shards]) => ({ database, shards, args: spread.argsFor(shards) }));
}

/**
 * The targets of a spread over every shard held now (a keyless read, marked `every`; an `in` list
 * that names them all), read off the databases instead of shard by shard: 64 databases of 16 shards are 64 steps,
 * not 1024 lookups. A spread names distinct registered shards, and each registered shard is held
 * by exactly one database, so a spread as long as every database's shards together is all of them.
 * Null for any other spread.
 */
function everyDatabase(spread: Spread, layout: ShardLayout): PlanTarget[] | null {
  if (!spread.every) {
    let held = 0;
    for (const p of layout.databases) held += p.shards.length;
    if (spread.shards.length !== held) return null;
  }
  const targets: PlanTarget[] = [];
  for (const p of layout.databases) {
    if (p.shards.length === 0) continue;
    // A copy: the registry's list changes when a shard moves, and reports hand these to callers.
    const shards = p.shards.slice();
    targets.push({ database: p.index, shards, args: spread.argsFor(shards) });
  }
  return targets.sort((x, y) => x.database - y.database);
}
