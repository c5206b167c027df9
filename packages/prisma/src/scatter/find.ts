import { ShardedUUID } from "@shardkit/id";
import {
  keysetWhere,
  mergeSorted,
  type NormalizedSortKey,
  normalizeOrderBy,
  positionOf,
} from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, PlanTarget, ScatterRead } from "../plan.js";
import { isObj, type ModelInfo, readWindow, SORTABLE } from "./read.js";

/**
 * `findMany` / `findFirst(OrThrow)` over several databases. Every database gets the `orderBy`
 * with `id` appended as a tiebreaker, `take: skip + take` and no `skip`; the sorted lists are
 * merged (k-way) and cut to the window. A `cursor: { id }` is read on the shard its ID names and
 * becomes a keyset filter on every database.
 */
export function planFind(model: ModelInfo, operation: string, args: Obj): ScatterRead {
  const label = `${model.name}.${operation}`;
  const first = operation !== "findMany";
  if (args.distinct !== undefined)
    throw new UnsupportedShardOperationError(`${label} with distinct across shards is not supported`);
  const window = readWindow(args, label);
  if (first && args.take !== undefined && args.take !== 1)
    throw new UnsupportedShardOperationError(`${label}: take must be 1 (or absent) across shards`);
  const skip = window.skip;
  const take = first ? 1 : window.take;
  if (!first && args.orderBy === undefined && skip === 0 && take === undefined && args.cursor === undefined) {
    // No order asked and no window: any order of the rows is the answer, so the exact merge of the
    // databases' answers is their union (no tiebreaker to sort by, no k-way merge).
    return {
      operation: "findMany",
      argsFor: (target: PlanTarget) => target.args,
      merge: (values) => (values as Obj[][]).flat(),
    };
  }
  const tiebreaker = tiebreakerOf(model, label);
  const { keys, orderBy } = sortKeys(model, label, args.orderBy, tiebreaker);
  const { selection, added } = withFields(
    args,
    keys.map((k) => k.field),
  );

  const read = (after: Obj | undefined): ScatterRead => ({
    operation: "findMany",
    argsFor(target: PlanTarget) {
      // Built whole, without `delete`: an object that loses properties turns into a slow
      // dictionary for every leg that reads it.
      const { skip: _skip, cursor: _cursor, take: _take, where: own, ...rest } = target.args;
      const where = and(own, after);
      return {
        ...rest,
        ...selection,
        orderBy,
        ...(take === undefined ? {} : { take: skip + take }),
        ...(where === undefined ? {} : { where }),
      };
    },
    merge(values) {
      const rows = mergeSorted(values as Obj[][], keys, { offset: skip, limit: take });
      if (added.length > 0) for (const row of rows) for (const f of added) delete row[f];
      return first ? (rows[0] ?? null) : rows;
    },
    ...(operation === "findFirstOrThrow" ? { orThrow: true } : {}),
  });

  if (args.cursor === undefined) return read(undefined);
  const id = cursorId(args.cursor, tiebreaker, label);
  return {
    ...read(undefined),
    prepare: {
      row: {
        shard: ShardedUUID.shardOf(id),
        lookup: { where: { [tiebreaker]: id }, select: Object.fromEntries(keys.map((k) => [k.field, true])) },
      },
      fields: keys.map((k) => k.field).filter((f) => f !== tiebreaker),
      resume(row, nullable) {
        if (row === null) return null;
        // Prisma's cursor includes the cursor row itself: the rows at or after its position.
        const keyset = dropNullTerms(keysetWhere(positionOf(row, keys)), nullable) as Obj;
        return read({ OR: [{ [tiebreaker]: id }, ...(keyset.OR as Obj[])] });
      },
    },
  };
}

/** The unique field that makes a merged order total: the model's `id`, a String shard key (a ShardedUUID). */
export function tiebreakerOf(model: ModelInfo, label: string): string {
  const id = model.fields.id;
  if (id?.kind === "scalar" && id.type === "String" && model.keys.includes("id")) return "id";
  throw new UnsupportedShardOperationError(
    `${label} across shards needs ${model.name}.id to be a String shard key (a ShardedUUID): the merged order is broken by id`,
  );
}

/** The order every database sorts by: the caller's, cut after `id`, with `id` appended when absent. */
export function sortKeys(
  model: ModelInfo,
  label: string,
  input: unknown,
  tiebreaker: string,
): { keys: NormalizedSortKey[]; orderBy: Obj[] } {
  const orderBy: Obj[] = [];
  const entries = input === undefined ? [] : Array.isArray(input) ? input : [input];
  for (const entry of entries as unknown[]) {
    if (!isObj(entry)) throw new UnsupportedShardOperationError(`${label}: orderBy entries must be objects`);
    for (const [name, spec] of Object.entries(entry)) {
      if (spec === undefined) continue;
      const field = model.fields[name];
      const scalar = field?.kind === "scalar" && SORTABLE.has(field.type);
      const direct = spec === "asc" || spec === "desc" || (isObj(spec) && "sort" in spec);
      if (!scalar || !direct)
        throw new UnsupportedShardOperationError(
          `${label}: orderBy ${name} across shards is not supported (order by String, Int, BigInt, Float, DateTime or Boolean fields; relation, aggregate, enum and Decimal ordering are not merged)`,
        );
      if (!orderBy.some((o) => name in o)) orderBy.push({ [name]: spec });
    }
  }
  const cut = orderBy.findIndex((o) => tiebreaker in o);
  if (cut >= 0)
    orderBy.length = cut + 1; // keys after a unique one never apply
  else orderBy.push({ [tiebreaker]: "asc" });
  return { keys: normalizeOrderBy(orderBy as never), orderBy };
}

function cursorId(cursor: unknown, tiebreaker: string, label: string): string {
  if (isObj(cursor)) {
    const keys = Object.keys(cursor).filter((k) => cursor[k] !== undefined);
    const id = cursor[tiebreaker];
    if (keys.length === 1 && typeof id === "string" && ShardedUUID.isValid(id)) return id;
  }
  throw new UnsupportedShardOperationError(
    `${label}: a cursor across shards must be { ${tiebreaker}: <ShardedUUID> } (the ID names the shard its sort values are read from)`,
  );
}

/** `select` / `omit` of `args` with `fields` present in every row; `added` are stripped after the merge. */
function withFields(args: Obj, fields: readonly string[]): { selection: Obj; added: string[] } {
  const added: string[] = [];
  if (isObj(args.select)) {
    const select = { ...args.select };
    for (const f of fields)
      if (!select[f]) {
        select[f] = true;
        added.push(f);
      }
    return { selection: { select }, added };
  }
  if (isObj(args.omit)) {
    const omit = { ...args.omit };
    for (const f of fields)
      if (omit[f]) {
        omit[f] = false;
        added.push(f);
      }
    return { selection: { omit }, added };
  }
  return { selection: {}, added };
}

/**
 * The keyset filter without `{ field: null }` terms on required fields: they match nothing, and
 * Prisma refuses null for a required field.
 */
export function dropNullTerms(filter: unknown, nullable: ReadonlySet<string>): unknown {
  if (Array.isArray(filter)) {
    return filter
      .filter((term) => {
        if (!isObj(term)) return true;
        const entries = Object.entries(term);
        return !(entries.length === 1 && entries[0]![1] === null && !nullable.has(entries[0]![0]));
      })
      .map((term) => dropNullTerms(term, nullable));
  }
  if (isObj(filter) && (Array.isArray(filter.OR) || Array.isArray(filter.AND))) {
    return Object.fromEntries(Object.entries(filter).map(([k, v]) => [k, dropNullTerms(v, nullable)]));
  }
  return filter;
}

export function and(a: unknown, b: Obj | undefined): unknown {
  if (b === undefined) return a;
  if (a === undefined || (isObj(a) && Object.keys(a).length === 0)) return b;
  return { AND: [a, b] };
}
