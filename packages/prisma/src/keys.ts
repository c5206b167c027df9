import { ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import { CrossShardError, ShardKeyRequiredError } from "./errors.js";
import type { DataModel } from "./internals.js";
import type { Obj } from "./plan.js";
import type { KeylessPolicy } from "./scatter/options.js";

/** How one model is routed. */
export interface ModelRouting {
  /**
   * Fields whose values are ShardedUUIDs naming the row's shard: its `id` and the foreign keys
   * of colocated parents (e.g. `["id", "customerId"]`). Default: `["id"]` when the model has a
   * String `id`, otherwise none (such a model is reached through `$shard` or a transaction).
   */
  keys?: string[];
  /** What keyless reads of this model do; overrides the extension's `keyless` (see `KeylessPolicy`). */
  keyless?: KeylessPolicy;
}

/** The shards an operation's arguments name, before anything is known of databases. */
export type Named =
  /** Every key names this shard. */
  | { kind: "one"; shard: ShardIdentifier }
  /** An `in` list on a key field (`where.field.in`), its values grouped by shard. */
  | { kind: "in"; field: string; byShard: Map<ShardIdentifier, unknown[]> }
  /** createMany rows, grouped by shard. */
  | { kind: "rows"; byShard: Map<ShardIdentifier, unknown[]> }
  /** No key: why, for the error or hint. */
  | { kind: "none"; hint: string };

/** `OrderItem` -> `orderItem`: the delegate property of a model on a Prisma client. */
export function delegateKey(model: string): string {
  let key = delegateKeys.get(model);
  if (key === undefined) {
    key = model.charAt(0).toLowerCase() + model.slice(1);
    delegateKeys.set(model, key);
  }
  return key;
}
/** Computed once per model name: every routed call looks its delegate up by it. */
const delegateKeys = new Map<string, string>();

type Found = { field: string; shard: ShardIdentifier };

type Resolve = (shard: ShardIdentifier) => ShardIdentifier;

/** Operations routed by their top-level `where`. */
export const WHERE_OPERATIONS = new Set([
  "findUnique",
  "findUniqueOrThrow",
  "findFirst",
  "findFirstOrThrow",
  "findMany",
  "update",
  "updateMany",
  "updateManyAndReturn",
  "delete",
  "deleteMany",
  "count",
  "aggregate",
  "groupBy",
]);

/**
 * Reads shard keys out of Prisma arguments: which shard(s) `where` / `data` name, and whether
 * nested writes stay on the parent's shard. Knows nothing of databases or of Prisma's client.
 */
export class KeyRouting {
  private readonly keys = new Map<string, readonly string[]>();
  /** model -> relation field -> related model */
  private readonly relations = new Map<string, Map<string, string>>();

  constructor(
    readonly dataModel: DataModel,
    private readonly resolve: Resolve,
    models: Record<string, ModelRouting> = {},
    issues: string[] = [],
  ) {
    for (const name of Object.keys(models)) {
      if (!dataModel.models[name]) issues.push(`models.${name}: no such model in the Prisma schema`);
    }
    for (const [name, model] of Object.entries(dataModel.models)) {
      const configured = models[name]?.keys;
      const idField = model.fields.id;
      const keys = configured ?? (idField?.kind === "scalar" && idField.type === "String" ? ["id"] : []);
      for (const key of keys) {
        const field = model.fields[key];
        if (!field) issues.push(`models.${name}.keys: ${name} has no field ${key}`);
        else if (field.kind !== "scalar" || field.type !== "String") {
          issues.push(
            `models.${name}.keys: ${name}.${key} is not a String scalar (a ShardedUUID is stored as a string/uuid)`,
          );
        }
      }
      this.keys.set(name, keys);
      const relations = new Map<string, string>();
      for (const [fieldName, field] of Object.entries(model.fields)) {
        if (field.kind === "object") relations.set(fieldName, field.type);
      }
      this.relations.set(name, relations);
    }
  }

  /** The key fields of a model. */
  keysOf(model: string): readonly string[] {
    return this.keys.get(model) ?? [];
  }

  /**
   * The shards `model.operation(args)` names. Throws (a ShardkitError) on keys that disagree,
   * nested writes that leave the parent's shard, malformed IDs and unknown shards.
   */
  named(model: string, operation: string, args: Obj): Named {
    let named: Named;
    switch (operation) {
      case "create":
        named = this.fromData(model, args.data, operation);
        break;
      case "createMany":
      case "createManyAndReturn":
        return this.rows(model, operation, args);
      case "upsert": {
        const where = this.fromWhere(model, args.where, operation);
        const data = this.fromData(model, args.create, operation);
        named =
          where.kind === "one" && data.kind === "one"
            ? this.agree(model, operation, [
                { field: "where", shard: where.shard },
                { field: "create", shard: data.shard },
              ])
            : where.kind === "one"
              ? where
              : data.kind === "one"
                ? data
                : where;
        break;
      }
      default:
        if (!WHERE_OPERATIONS.has(operation)) {
          return { kind: "none", hint: `${operation} is not routed by key; run it with $shard(...)` };
        }
        named = this.fromWhere(model, args.where, operation);
    }
    if (named.kind === "one") this.checkWrite(model, operation, args, named.shard);
    else if (named.kind === "in")
      for (const shard of named.byShard.keys()) this.checkWrite(model, operation, args, shard);
    return named;
  }

  /**
   * Checks that what a write puts in `data` stays on `shard`: key fields (foreign keys included)
   * and nested creates, connects, upserts, updates and deletes. Throws `CrossShardError`.
   */
  checkWrite(model: string, operation: string, args: Obj, shard: ShardIdentifier): void {
    switch (operation) {
      case "create":
      case "update":
      case "updateMany":
      case "updateManyAndReturn":
        this.checkData(model, args.data, shard, `${model}.${operation}`);
        break;
      case "upsert":
        this.checkData(model, args.create, shard, `${model}.${operation}`);
        this.checkData(model, args.update, shard, `${model}.${operation}`);
        break;
    }
  }

  private shardOf(value: unknown): ShardIdentifier {
    return this.resolve(ShardedUUID.shardOf(value as string));
  }

  private fromData(model: string, data: unknown, operation: string): Named {
    const keys = this.keysOf(model);
    if (keys.length === 0)
      return { kind: "none", hint: `${model} has no shard key fields; run it with $shard(...)` };
    const found: { field: string; shard: ShardIdentifier }[] = [];
    if (data && typeof data === "object") {
      for (const key of keys) {
        const value = scalarValue((data as Obj)[key]);
        if (value !== undefined) found.push({ field: key, shard: this.shardOf(value) });
      }
    }
    if (found.length === 0) {
      return {
        kind: "none",
        hint: `data has none of its key fields (${keys.join(", ")}); generate the ID with ShardedId.generate or ShardedId.colocatedWith`,
      };
    }
    return this.agree(model, operation, found);
  }

  private fromWhere(model: string, where: unknown, operation: string): Named {
    const keys = this.keysOf(model);
    if (keys.length === 0)
      return { kind: "none", hint: `${model} has no shard key fields; run it with $shard(...)` };
    const eq: Found[] = [];
    const inList = this.collect(keys, where, true, eq, undefined);
    if (eq.length > 0) return this.agree(model, operation, eq);
    if (inList) {
      const { field, values } = inList;
      const byShard = new Map<ShardIdentifier, unknown[]>();
      for (const value of values) push(byShard, this.shardOf(value), value);
      if (byShard.size === 0) return { kind: "none", hint: `where.${field}.in is empty` };
      if (byShard.size === 1) return { kind: "one", shard: byShard.keys().next().value! };
      return { kind: "in", field, byShard };
    }
    return { kind: "none", hint: `where has no equality or \`in\` on its key fields (${keys.join(", ")})` };
  }

  /** Equalities on key fields (top level and inside AND) into `eq`; the first top-level `in` list. */
  private collect(
    keys: readonly string[],
    where: unknown,
    top: boolean,
    eq: Found[],
    inList: { field: string; values: unknown[] } | undefined,
  ): { field: string; values: unknown[] } | undefined {
    if (!where || typeof where !== "object") return inList;
    const obj = where as Obj;
    for (const key of keys) {
      const condition = obj[key];
      const value = scalarValue(condition);
      if (value !== undefined) {
        eq.push({ field: key, shard: this.shardOf(value) });
      } else if (condition && typeof condition === "object") {
        const c = condition as Obj;
        if (c.equals !== undefined) eq.push({ field: key, shard: this.shardOf(c.equals) });
        else if (Array.isArray(c.in) && top && !inList) inList = { field: key, values: c.in };
      }
    }
    const and = obj.AND;
    if (Array.isArray(and)) for (const part of and) inList = this.collect(keys, part, false, eq, inList);
    else if (and && typeof and === "object") inList = this.collect(keys, and, false, eq, inList);
    return inList;
  }

  private rows(model: string, operation: string, args: Obj): Named {
    const rows = Array.isArray(args.data) ? args.data : args.data === undefined ? [] : [args.data];
    const byShard = new Map<ShardIdentifier, unknown[]>();
    for (const [i, row] of rows.entries()) {
      const named = this.fromData(model, row, `${operation} data[${i}]`);
      if (named.kind !== "one") {
        throw new ShardKeyRequiredError(
          model,
          `${operation} data[${i}]`,
          named.kind === "none" ? named.hint : "",
        );
      }
      push(byShard, named.shard, row);
    }
    if (byShard.size === 0) return { kind: "none", hint: `${operation} with no rows` };
    if (byShard.size === 1) return { kind: "one", shard: byShard.keys().next().value! };
    return { kind: "rows", byShard };
  }

  private agree(model: string, operation: string, found: Found[]): Named {
    const first = found[0]!;
    for (const other of found) {
      if (other.shard !== first.shard) {
        throw new CrossShardError(
          `${model}.${operation}: keys disagree: ${first.field} names shard ${first.shard.key}, ${other.field} names shard ${other.shard.key}`,
          [first.shard, other.shard],
        );
      }
    }
    return { kind: "one", shard: first.shard };
  }

  /**
   * Nested writes run on the parent's shard: every key field in `data` (foreign keys included),
   * and every key named by a nested create, connect, connectOrCreate, update, upsert, delete or
   * set, must name `shard`.
   */
  private checkData(model: string, data: unknown, shard: ShardIdentifier, label: string): void {
    if (!data || typeof data !== "object") return;
    const keys = this.keysOf(model);
    const relations = this.relations.get(model);
    for (const [field, value] of Object.entries(data as Obj)) {
      const related = relations?.get(field);
      if (related !== undefined) {
        this.checkNested(related, value, shard, `${label} ${field}`);
      } else if (keys.includes(field)) {
        const key = scalarValue(value);
        if (key !== undefined) this.expectShard(model, field, key, shard, label);
      }
    }
  }

  private checkNested(model: string, ops: unknown, shard: ShardIdentifier, label: string): void {
    if (!ops || typeof ops !== "object") return;
    for (const [op, value] of Object.entries(ops as Obj)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (!item || typeof item !== "object") continue;
        const it = item as Obj;
        const at = `${label}.${op}`;
        switch (op) {
          case "create":
            this.checkData(model, it, shard, at);
            break;
          case "createMany":
            for (const row of Array.isArray(it.data) ? it.data : [it.data])
              this.checkData(model, row, shard, at);
            break;
          case "connectOrCreate":
            this.checkWhere(model, it.where, shard, at);
            this.checkData(model, it.create, shard, at);
            break;
          case "upsert":
            this.checkWhere(model, it.where, shard, at);
            this.checkData(model, it.create, shard, at);
            this.checkData(model, it.update, shard, at);
            break;
          case "update":
          case "updateMany": {
            const structured = "data" in it && Object.keys(it).every((k) => k === "data" || k === "where");
            if (structured) {
              this.checkWhere(model, it.where, shard, at);
              this.checkData(model, it.data, shard, at);
            } else {
              this.checkData(model, it, shard, at);
            }
            break;
          }
          default: // connect, set, disconnect, delete, deleteMany: unique or filter inputs
            this.checkWhere(model, it, shard, at);
        }
      }
    }
  }

  private checkWhere(model: string, where: unknown, shard: ShardIdentifier, label: string): void {
    if (!where || typeof where !== "object") return;
    for (const key of this.keysOf(model)) {
      const condition = (where as Obj)[key];
      const value = scalarValue(condition);
      if (value !== undefined) this.expectShard(model, key, value, shard, label);
      else if (condition && typeof condition === "object") {
        const c = condition as Obj;
        if (c.equals !== undefined) this.expectShard(model, key, c.equals, shard, label);
        if (Array.isArray(c.in)) for (const v of c.in) this.expectShard(model, key, v, shard, label);
      }
    }
  }

  private expectShard(
    model: string,
    field: string,
    value: unknown,
    shard: ShardIdentifier,
    label: string,
  ): void {
    const named = this.shardOf(value);
    if (named !== shard) {
      throw new CrossShardError(
        `${label}: ${model}.${field} names shard ${named.key}, but the operation runs on shard ${shard.key} (nested writes stay on the parent's shard)`,
        [shard, named],
      );
    }
  }
}

/** A key's value when it is given directly or as `{ set: value }`; undefined for filters. */
function scalarValue(value: unknown): unknown {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && "set" in value && Object.keys(value).length === 1) {
    return (value as Obj).set;
  }
  return undefined;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
