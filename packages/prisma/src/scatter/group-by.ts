import {
  type AggregateRequest,
  compareBy,
  type GroupRow,
  mergeGroupBy,
  type NormalizedSortKey,
  normalizeOrderBy,
  planAggregate,
} from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, ScatterRead } from "../plan.js";
import { aggregateRequest, checkAggregateField } from "./aggregate.js";
import {
  AGGREGATES,
  type AggregateKind,
  isObj,
  type ModelInfo,
  readWindow,
  SORTABLE,
  whereOf,
} from "./read.js";

/**
 * `groupBy` over several databases: each database groups its rows, the groups are merged across
 * databases (counts and sums add, min/max compare, avg = sum / count), then `orderBy` (by fields
 * or by aggregates, selected or not), `skip` and `take` apply.
 */
export function planGroupBy(model: ModelInfo, args: Obj): ScatterRead {
  const label = `${model.name}.groupBy`;
  if (args.having !== undefined && !(isObj(args.having) && Object.keys(args.having).length === 0))
    throw new UnsupportedShardOperationError(
      `${label} with having across shards is not supported: a group's totals exist only after the merge. Filter the merged groups instead`,
    );
  const by = (Array.isArray(args.by) ? args.by : [args.by]) as string[];
  for (const f of by) {
    const field = model.fields[f];
    if (!field || !(field.kind === "enum" || (field.kind === "scalar" && SORTABLE.has(field.type))))
      throw new UnsupportedShardOperationError(
        `${label}: groupBy across shards by ${f} is not supported (group by String, Int, BigInt, Float, DateTime, Boolean or enum fields)`,
      );
  }
  const { skip, take } = readWindow(args, label);
  const request = aggregateRequest(model, label, args);
  // Ordering by an aggregate that is not selected: compute it too, drop it after sorting.
  const full: AggregateRequest = { ...request };
  const order: { get: (row: GroupRow) => unknown; key: NormalizedSortKey }[] = [];
  const entries =
    args.orderBy === undefined ? [] : Array.isArray(args.orderBy) ? args.orderBy : [args.orderBy];
  for (const entry of entries as unknown[]) {
    for (const [name, spec] of Object.entries(isObj(entry) ? entry : {})) {
      if (spec === undefined) continue;
      if ((AGGREGATES as readonly string[]).includes(name) && isObj(spec) && !("sort" in spec)) {
        const kind = name as AggregateKind;
        for (const [f, s] of Object.entries(spec)) {
          if (s === undefined) continue;
          checkAggregateField(model, label, kind, f);
          addToRequest(full, kind, f);
          const k = normalizeOrderBy({ [`k${order.length}`]: s as "asc" } as never)[0]!;
          order.push({ get: (row) => (row[kind] as Obj | undefined)?.[f], key: k });
        }
      } else {
        if (!by.includes(name))
          throw new UnsupportedShardOperationError(
            `${label}: orderBy ${name} must be one of by or an aggregate`,
          );
        if (model.fields[name]?.kind !== "scalar")
          throw new UnsupportedShardOperationError(
            `${label}: ordering groups by the enum ${name} across shards is not supported`,
          );
        const k = normalizeOrderBy({ [`k${order.length}`]: spec } as never)[0]!;
        order.push({ get: (row) => row[name], key: k });
      }
    }
  }
  const plan = planAggregate(full);
  return {
    operation: "groupBy",
    argsFor: (target) => ({ by, ...whereOf(target.args), ...plan }),
    merge(values) {
      let groups = mergeGroupBy(values as GroupRow[][], by, full);
      if (order.length > 0) {
        const cmp = compareBy<Obj>(order.map((o) => o.key));
        groups = groups
          .map((row) => ({ row, k: Object.fromEntries(order.map((o) => [o.key.field, o.get(row)])) }))
          .sort((a, b) => cmp(a.k, b.k))
          .map((x) => x.row);
      }
      return groups
        .slice(skip, take === undefined ? undefined : skip + take)
        .map((row) => project(row, request));
    },
  };
}

function addToRequest(request: AggregateRequest, kind: AggregateKind, field: string): void {
  const r = request as Record<string, unknown>;
  if (kind === "_count") {
    const current = request._count;
    r._count = current === true ? { _all: true, [field]: true } : { ...(current ?? {}), [field]: true };
  } else r[kind] = { ...((r[kind] as Obj | undefined) ?? {}), [field]: true };
}

/** A merged group with exactly the aggregates the caller asked for. */
function project(row: GroupRow, request: AggregateRequest): GroupRow {
  const out: Obj = { ...row };
  for (const kind of AGGREGATES) {
    const asked = request[kind];
    const value = out[kind];
    if (asked === undefined) delete out[kind];
    else if (asked === true) out[kind] = isObj(value) ? value._all : value;
    else if (isObj(value))
      out[kind] = Object.fromEntries(Object.entries(value).filter(([f]) => (asked as Obj)[f]));
  }
  return out as GroupRow;
}
