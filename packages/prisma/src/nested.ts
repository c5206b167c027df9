// Nested writes stay on the parent's shard: the IDs filled in for new rows under a write, and the
// check that every key a nested write names is the parent's shard.
import type { ShardIdentifier } from "@shardkit/id";
import { CrossShardError, UnsupportedShardOperationError } from "./errors.js";
import { type KeySchema, scalarValue } from "./keys/key-schema.js";
import type { Obj } from "./plan.js";

/** What the nested-write functions need of the reading of one call. */
export interface NestedReader {
  readonly schema: KeySchema;
  /** The call's lookups are being gathered: nothing is filled in, nothing compared to a pending key. */
  readonly gathering: boolean;
  /** The shard a key value names; undefined while its lookup is gathered (gathering only). */
  shardOf(model: string, field: string, value: unknown): ShardIdentifier | undefined;
}

/**
 * `data` with a ShardedUUID on `shard` for a new row (`create`) without one, and for every
 * nested create under it, however deep (copied where anything is added).
 */
export function fillRow(
  reader: NestedReader,
  model: string,
  data: Obj,
  shard: ShardIdentifier,
  create: boolean,
  at: string,
): Obj {
  if (!data || typeof data !== "object" || reader.gathering) return data;
  const { schema } = reader;
  const spec = schema.models.get(model);
  let out = data;
  const set = (field: string, value: unknown) => {
    if (out === data) out = { ...data };
    out[field] = value;
  };
  if (create && spec?.fill && data[spec.fill] === undefined) set(spec.fill, schema.generate(shard));
  const relations = schema.relations.get(model);
  if (!relations) return out;
  for (const [field, value] of Object.entries(data)) {
    const related = relations.get(field);
    if (related === undefined || !value || typeof value !== "object") continue;
    const label = `${at}.${field}`;
    let ops = value as Obj;
    const setOp = (op: string, next: unknown) => {
      if (ops === value) ops = { ...(value as Obj) };
      ops[op] = next;
    };
    for (const [op, item] of Object.entries(value as Obj)) {
      const each = (fn: (x: Obj) => Obj) => {
        const next = Array.isArray(item) ? item.map((x) => fn(x as Obj)) : fn(item as Obj);
        if (Array.isArray(item) ? (next as Obj[]).some((x, i) => x !== item[i]) : next !== item)
          setOp(op, next);
      };
      const nested = (row: Obj, isCreate: boolean) => {
        refuseNestedClaims(schema, related, row, `${label}.${op}`);
        return fillRow(reader, related, row, shard, isCreate, `${label}.${op}`);
      };
      switch (op) {
        case "create":
          each((row) => nested(row, true));
          break;
        case "createMany":
          each((it) => {
            const rows = it?.data;
            if (!rows) return it;
            const next = Array.isArray(rows)
              ? rows.map((r) => nested(r as Obj, true))
              : nested(rows as Obj, true);
            return { ...it, data: next };
          });
          break;
        case "connectOrCreate":
          each((it) => ({ ...it, create: nested((it?.create ?? {}) as Obj, true) }));
          break;
        case "upsert":
          each((it) => ({
            ...it,
            create: nested((it?.create ?? {}) as Obj, true),
            update: nested((it?.update ?? {}) as Obj, false),
          }));
          break;
        case "update":
        case "updateMany":
          each((it) =>
            structuredUpdate(it) ? { ...it, data: nested((it.data ?? {}) as Obj, false) } : nested(it, false),
          );
          break;
      }
    }
    if (ops !== value) set(field, ops);
  }
  return out;
}

function refuseNestedClaims(schema: KeySchema, model: string, data: Obj, at: string): void {
  const spec = schema.models.get(model);
  if (!spec || !data || typeof data !== "object") return;
  for (const key of spec.unique.values()) {
    if (data[key.field] !== undefined) {
      throw new UnsupportedShardOperationError(
        `${at}: ${key.unique.scope} is unique across shards and a nested write cannot claim it; write the ${model} with its own create or update`,
      );
    }
  }
}

/**
 * Checks that what a write puts in `data` stays on `shard`: key fields (foreign keys included)
 * and nested creates, connects, upserts, updates and deletes. Throws `CrossShardError`. While
 * gathering, `shard` may be unknown yet: the keys are read for their lookups only.
 */
export function checkWrite(
  reader: NestedReader,
  model: string,
  operation: string,
  args: Obj,
  shard: ShardIdentifier | undefined,
): void {
  const label = `${model}.${operation}`;
  switch (operation) {
    case "create":
    case "update":
    case "updateMany":
    case "updateManyAndReturn":
      checkData(reader, model, args.data, shard, label);
      break;
    case "upsert":
      checkData(reader, model, args.create, shard, label);
      checkData(reader, model, args.update, shard, label);
      break;
  }
}

/**
 * Nested writes run on the parent's shard: every key field in `data` (foreign keys included),
 * and every key named by a nested create, connect, connectOrCreate, update, upsert, delete or
 * set, must name `shard`.
 */
function checkData(
  reader: NestedReader,
  model: string,
  data: unknown,
  shard: ShardIdentifier | undefined,
  label: string,
): void {
  if (!data || typeof data !== "object") return;
  const keys = reader.schema.models.get(model)?.names ?? [];
  const relations = reader.schema.relations.get(model);
  for (const [field, value] of Object.entries(data as Obj)) {
    const related = relations?.get(field);
    if (related !== undefined) {
      checkNested(reader, related, value, shard, `${label} ${field}`);
    } else if (keys.includes(field)) {
      const key = scalarValue(value);
      if (key !== undefined) expectShard(reader, model, field, key, shard, label);
    }
  }
}

function checkNested(
  reader: NestedReader,
  model: string,
  ops: unknown,
  shard: ShardIdentifier | undefined,
  label: string,
): void {
  if (!ops || typeof ops !== "object") return;
  for (const [op, value] of Object.entries(ops as Obj)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (!item || typeof item !== "object") continue;
      const it = item as Obj;
      const at = `${label}.${op}`;
      switch (op) {
        case "create":
          checkData(reader, model, it, shard, at);
          break;
        case "createMany":
          for (const row of Array.isArray(it.data) ? it.data : [it.data])
            checkData(reader, model, row, shard, at);
          break;
        case "connectOrCreate":
          checkWhere(reader, model, it.where, shard, at);
          checkData(reader, model, it.create, shard, at);
          break;
        case "upsert":
          checkWhere(reader, model, it.where, shard, at);
          checkData(reader, model, it.create, shard, at);
          checkData(reader, model, it.update, shard, at);
          break;
        case "update":
        case "updateMany": {
          if (structuredUpdate(it)) {
            checkWhere(reader, model, it.where, shard, at);
            checkData(reader, model, it.data, shard, at);
          } else {
            checkData(reader, model, it, shard, at);
          }
          break;
        }
        default: // connect, set, disconnect, delete, deleteMany: unique or filter inputs
          checkWhere(reader, model, it, shard, at);
      }
    }
  }
}

function checkWhere(
  reader: NestedReader,
  model: string,
  where: unknown,
  shard: ShardIdentifier | undefined,
  label: string,
): void {
  if (!where || typeof where !== "object") return;
  for (const key of reader.schema.models.get(model)?.names ?? []) {
    const condition = (where as Obj)[key];
    const value = scalarValue(condition);
    if (value !== undefined) expectShard(reader, model, key, value, shard, label);
    else if (condition && typeof condition === "object") {
      const c = condition as Obj;
      if (c.equals !== undefined) expectShard(reader, model, key, c.equals, shard, label);
      if (Array.isArray(c.in)) for (const v of c.in) expectShard(reader, model, key, v, shard, label);
    }
  }
}

function expectShard(
  reader: NestedReader,
  model: string,
  field: string,
  value: unknown,
  shard: ShardIdentifier | undefined,
  label: string,
): void {
  const named = reader.shardOf(model, field, value);
  if (named === undefined || shard === undefined || named === shard) return;
  throw new CrossShardError(
    `${label}: ${model}.${field} names shard ${named.key}, but the operation runs on shard ${shard.key} (nested writes stay on the parent's shard)`,
    [shard, named],
  );
}

/** A nested `update: { where, data }` (as opposed to `update: data` of a to-one relation). */
export function structuredUpdate(it: Obj): boolean {
  return "data" in it && Object.keys(it).every((k) => k === "data" || k === "where");
}
