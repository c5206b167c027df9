// The runner's first step: a plan, which names logical shards, placed on the databases that hold
// them when it runs. The same plan placed again after a move lands at the shards' new databases.
import type { ShardIdentifier } from "@shardkit/id";
import type { Obj, Plan, PlanTarget, Spread } from "./plan.js";
import type { Placement } from "./planner.js";

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
export function place(plan: Exclude<Plan, { kind: "refuse" }>, placement: Placement, args?: unknown): Placed {
  if (plan.kind === "shard") {
    const database = placement.databaseOf(plan.shard).index;
    return {
      shape: "shard",
      targets: [{ database, shards: [plan.shard], args: (plan.args ?? args ?? {}) as Obj }],
    };
  }
  const targets = targetsOf(plan.spread, placement);
  const shape = plan.read ? "scatter" : targets.length === 1 ? "database" : plan.write ? "split" : "scatter";
  return { shape, targets };
}

/**
 * Where a plan's shards are now: one statement per database holding some of them, in database
 * order, with the call's args cut to those shards. The runner's step between a plan and the
 * databases; the same plan placed again after a move lands at the shards' new databases.
 */
function targetsOf(spread: Spread, placement: Placement): PlanTarget[] {
  const byDatabase = new Map<number, ShardIdentifier[]>();
  for (const shard of spread.shards) {
    const database = placement.databaseOf(shard).index;
    const shards = byDatabase.get(database);
    if (shards) shards.push(shard);
    else byDatabase.set(database, [shard]);
  }
  return [...byDatabase]
    .sort(([x], [y]) => x - y)
    .map(([database, shards]) => ({ database, shards, args: spread.argsFor(shards) }));
}
