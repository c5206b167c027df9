import {
  type AggregateRequest,
  type AggregateResult,
  mergeAggregates,
  planAggregate,
} from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, ScatterRead } from "../plan.js";
import {
  AGGREGATES,
  type AggregateKind,
  isObj,
  type ModelInfo,
  SORTABLE,
  SUMMABLE,
  whereOf,
} from "./read.js";

/**
 * `aggregate` over several databases: `_count` and `_sum` add, `_min` / `_max` compare, `_avg` is
 * the merged sum over the merged count (each database is asked for its sum and count).
 */
export function planAggregateRead(model: ModelInfo, args: Obj): ScatterRead {
  const label = `${model.name}.aggregate`;
  if (args.cursor !== undefined || args.take !== undefined || (args.skip !== undefined && args.skip !== 0))
    throw new UnsupportedShardOperationError(
      `${label} over a cursor/skip/take window across shards is not supported (the window depends on an order across every shard)`,
    );
  const request = aggregateRequest(model, label, args);
  const plan = planAggregate(request);
  return {
    operation: "aggregate",
    argsFor: (target) => ({ ...whereOf(target.args), ...plan }),
    merge: (values) => mergeAggregates(values as AggregateResult[], request),
  };
}

/** The aggregates a call asks for, each checked to merge exactly. */
export function aggregateRequest(model: ModelInfo, label: string, args: Obj): AggregateRequest {
  const request: Obj = {};
  for (const kind of AGGREGATES) {
    const value = args[kind];
    if (value === undefined) continue;
    if (kind === "_count" && value === true) {
      request._count = true;
      continue;
    }
    if (!isObj(value)) throw new UnsupportedShardOperationError(`${label}: ${kind} must list fields`);
    for (const f of Object.keys(value)) if (value[f]) checkAggregateField(model, label, kind, f);
    request[kind] = value;
  }
  return request as AggregateRequest;
}

export function checkAggregateField(model: ModelInfo, label: string, kind: AggregateKind, f: string): void {
  if (kind === "_count") return;
  const field = model.fields[f];
  const ok =
    field?.kind === "scalar" && (kind === "_sum" || kind === "_avg" ? SUMMABLE : SORTABLE).has(field.type);
  if (!ok)
    throw new UnsupportedShardOperationError(
      `${label}: ${kind}.${f} across shards is not supported (${field ? `${field.type} values` : "no such field"}; sums and averages merge Int, BigInt and Float, min/max also String, DateTime and Boolean)`,
    );
}
