import { type AggregateRequest, mergeAggregates } from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, ScatterRead } from "../plan.js";
import { isObj, type ModelInfo, readWindow, whereOf } from "./read.js";

/** `count` over several databases: counts add; a `skip` / `take` window applies to the total. */
export function planCount(model: ModelInfo, args: Obj): ScatterRead {
  const label = `${model.name}.count`;
  if (args.cursor !== undefined || args.distinct !== undefined)
    throw new UnsupportedShardOperationError(
      `${label} with cursor or distinct across shards is not supported`,
    );
  const { skip, take } = readWindow(args, label);
  const select = isObj(args.select) ? args.select : undefined;
  const windowed = skip > 0 || take !== undefined;
  if (windowed && select && Object.keys(select).some((f) => f !== "_all" && select[f]))
    throw new UnsupportedShardOperationError(
      `${label}: counting fields of a skip/take window across shards depends on which rows are in it; count _all or drop skip/take`,
    );
  const request: AggregateRequest = { _count: select ? (select as Record<string, boolean>) : true };
  return {
    operation: "count",
    argsFor: (target) => ({ ...whereOf(target.args), ...(select ? { select } : {}) }),
    merge(values) {
      const merged = mergeAggregates(
        values.map((v) => ({ _count: v as number })),
        request,
      )._count as number | Record<string, number>;
      if (!windowed) return merged;
      const total = typeof merged === "number" ? merged : (merged._all as number);
      const inWindow = Math.max(0, Math.min(take ?? Number.POSITIVE_INFINITY, total - skip));
      return typeof merged === "number" ? inWindow : { ...merged, _all: inWindow };
    },
  };
}
