import { ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import type { DataModel } from "./data-model.js";
import { CrossShardError, RegistryConfigError, ShardKeyRequiredError } from "./errors.js";
import type { KeylessPolicy } from "./scatter-reads.js";

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

/** Where an operation goes, decided from (model, operation, args) alone. */
export type RoutePlan =
  /** One shard; args unchanged. */
  | { kind: "shard"; shard: ShardIdentifier }
  /** Several shards, each with its own args (an `in` list or createMany rows split per shard). */
  | { kind: "split"; parts: { shard: ShardIdentifier; args: Record<string, unknown> }[] }
  /** The arguments name no shard. */
  | { kind: "keyless"; hint: string };

type Resolve = (shard: ShardIdentifier) => ShardIdentifier;
type Obj = Record<string, unknown>;

const WHERE_OPERATIONS = new Set([
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
 * The routing core: decides from (model, operation, args) which shard(s) an operation runs on.
 * It knows nothing of Prisma's client API (the `$extends` glue lives in extension.ts), so another
 * integration can reuse it.
 */
export class Router {
  private readonly keys = new Map<string, readonly string[]>();
  /** model -> relation field -> related model */
  private readonly relations = new Map<string, Map<string, string>>();

  constructor(
    dataModel: DataModel,
    private readonly resolve: Resolve,
    models: Record<string, ModelRouting> = {},
  ) {
    const issues: string[] = [];
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
    if (issues.length > 0) throw new RegistryConfigError(issues);
  }

  /** The key fields of a model. */
  keysOf(model: string): readonly string[] {
    return this.keys.get(model) ?? [];
  }

  /** Decides where `model.operation(args)` runs. Throws on keys that disagree or name unknown shards. */
  plan(model: string, operation: string, args: Obj | undefined): RoutePlan {
    const a = args ?? {};
    const label = `${model}.${operation}`;
    let plan: RoutePlan;
    switch (operation) {
      case "create":
        plan = this.fromData(model, a.data, label);
        break;
      case "createMany":
      case "createManyAndReturn":
        return this.splitRows(model, a, label);
      case "upsert":
        plan = this.combine(label, [
          this.fromWhere(model, a.where, label),
          this.fromData(model, a.create, label),
        ]);
        break;
      default:
        if (!WHERE_OPERATIONS.has(operation)) {
          return { kind: "keyless", hint: `${operation} is not routed by key; run it with $shard(...)` };
        }
        plan = this.fromWhere(model, a.where, label);
        if (plan.kind === "split") {
          plan = {
            kind: "split",
            parts: plan.parts.map((part) => ({ shard: part.shard, args: { ...a, ...part.args } })),
          };
        }
    }
    if (plan.kind === "shard") {
      if (operation === "create") this.checkData(model, a.data, plan.shard, label);
      if (operation === "upsert") {
        this.checkData(model, a.create, plan.shard, label);
        this.checkData(model, a.update, plan.shard, label);
      }
      if (operation === "update") this.checkData(model, a.data, plan.shard, label);
    }
    if (plan.kind !== "keyless" && (operation === "updateMany" || operation === "updateManyAndReturn")) {
      const shards = plan.kind === "shard" ? [plan.shard] : plan.parts.map((p) => p.shard);
      for (const shard of shards) this.checkData(model, a.data, shard, label);
    }
    return plan;
  }

  private shardOf(value: unknown): ShardIdentifier {
    return this.resolve(ShardedUUID.shardOf(value as string));
  }

  private fromData(model: string, data: unknown, label: string): RoutePlan {
    const keys = this.keysOf(model);
    if (keys.length === 0) {
      return { kind: "keyless", hint: `${model} has no shard key fields; run it with $shard(...)` };
    }
    const found: { field: string; shard: ShardIdentifier }[] = [];
    if (data && typeof data === "object") {
      for (const key of keys) {
        const value = scalarValue((data as Obj)[key]);
        if (value !== undefined) found.push({ field: key, shard: this.shardOf(value) });
      }
    }
    if (found.length === 0) {
      return {
        kind: "keyless",
        hint: `data has none of its key fields (${keys.join(", ")}); generate the ID with ShardedId.generate or ShardedId.colocatedWith`,
      };
    }
    return this.agree(label, found);
  }

  private fromWhere(model: string, where: unknown, label: string): RoutePlan {
    const keys = this.keysOf(model);
    if (keys.length === 0) {
      return { kind: "keyless", hint: `${model} has no shard key fields; run it with $shard(...)` };
    }
    const eq: { field: string; shard: ShardIdentifier }[] = [];
    let inList: { field: string; values: unknown[] } | undefined;
    const visit = (w: unknown, top: boolean) => {
      if (!w || typeof w !== "object") return;
      const obj = w as Obj;
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
      if (Array.isArray(and)) for (const part of and) visit(part, false);
      else if (and && typeof and === "object") visit(and, false);
    };
    visit(where, true);
    if (eq.length > 0) return this.agree(label, eq);
    if (inList) {
      const { field, values } = inList;
      const byShard = new Map<ShardIdentifier, unknown[]>();
      for (const value of values) {
        const shard = this.shardOf(value);
        const list = byShard.get(shard);
        if (list) list.push(value);
        else byShard.set(shard, [value]);
      }
      if (byShard.size === 0) return { kind: "keyless", hint: `where.${field}.in is empty` };
      if (byShard.size === 1) return { kind: "shard", shard: byShard.keys().next().value! };
      const w = where as Obj;
      const parts = [...byShard]
        .sort(([a], [b]) => a.bits - b.bits)
        .map(([shard, list]) => ({
          shard,
          args: { where: { ...w, [field]: { ...(w[field] as Obj), in: list } } } as Obj,
        }));
      return { kind: "split", parts };
    }
    return {
      kind: "keyless",
      hint: `where has no equality or \`in\` on its key fields (${keys.join(", ")})`,
    };
  }

  private splitRows(model: string, args: Obj, label: string): RoutePlan {
    const rows = Array.isArray(args.data) ? args.data : args.data === undefined ? [] : [args.data];
    const byShard = new Map<ShardIdentifier, unknown[]>();
    for (const [i, row] of rows.entries()) {
      const plan = this.fromData(model, row, `${label} data[${i}]`);
      if (plan.kind !== "shard") {
        throw new ShardKeyRequiredError(
          model,
          `${label.split(".")[1]} data[${i}]`,
          plan.kind === "keyless" ? plan.hint : "",
        );
      }
      const list = byShard.get(plan.shard);
      if (list) list.push(row);
      else byShard.set(plan.shard, [row]);
    }
    if (byShard.size === 0) return { kind: "keyless", hint: "createMany with no rows" };
    if (byShard.size === 1) return { kind: "shard", shard: byShard.keys().next().value! };
    return {
      kind: "split",
      parts: [...byShard]
        .sort(([a], [b]) => a.bits - b.bits)
        .map(([shard, data]) => ({ shard, args: { ...args, data } })),
    };
  }

  private agree(label: string, found: { field: string; shard: ShardIdentifier }[]): RoutePlan {
    const first = found[0]!;
    for (const other of found) {
      if (other.shard !== first.shard) {
        throw new CrossShardError(
          `${label}: keys disagree: ${first.field} names shard ${first.shard.key}, ${other.field} names shard ${other.shard.key}`,
          [first.shard, other.shard],
        );
      }
    }
    return { kind: "shard", shard: first.shard };
  }

  private combine(label: string, plans: RoutePlan[]): RoutePlan {
    const shards = plans.filter((p): p is { kind: "shard"; shard: ShardIdentifier } => p.kind === "shard");
    if (shards.length === 0) return plans[0]!;
    return this.agree(
      label,
      shards.map((p) => ({ field: "key", shard: p.shard })),
    );
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
