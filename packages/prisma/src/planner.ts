import { isShardkitError, type ShardIdentifier } from "@shardkit/id";
import {
  CrossShardError,
  RoutingOptionsError,
  ScatterRefusedError,
  ShardKeyRequiredError,
  UnsupportedShardOperationError,
} from "./errors.js";
import type { Named } from "./keys/key-schema.js";
import { delegateKey, KeyRouting, type ModelRouting } from "./keys/keys.js";
import { READS, SCATTER_READS } from "./operations.js";
import type { OwnershipHook } from "./ownership.js";
import type { Obj, Plan, PlanContext, ScatterRead, Spread } from "./plan.js";
import type { DataModel } from "./prisma-private.js";
import { planAggregateRead } from "./scatter/aggregate.js";
import { planCount } from "./scatter/count.js";
import { planFind } from "./scatter/find.js";
import { planGroupBy } from "./scatter/group-by.js";
import {
  type KeylessPolicy,
  type KeylessScatterOptions,
  parseKeyless,
  type ScatterReadOptions,
} from "./scatter/options.js";
import { planPageRead, type ScatterPageArgs } from "./scatter/page.js";
import type { ModelInfo } from "./scatter/read.js";
import type { Lookup } from "./shard-key.js";
import type { LegacyIds } from "./strategies.js";

/**
 * The layout: which database holds each logical shard now. The registry keeps it; an open partition
 * map (`ownership`) brings it up to date when a database refuses a call for a shard it no longer owns.
 */
export interface ShardLayout {
  /** The registered shard a shard names (the registry's unknown-shard policy applies); throws `UnknownShardError`. */
  resolve(shard: ShardIdentifier): ShardIdentifier;
  /** Every database with the logical shards it holds; a database's index is its position. */
  readonly databases: readonly { readonly shards: readonly ShardIdentifier[]; readonly index: number }[];
  /** The database holding a registered shard. */
  databaseOf(shard: ShardIdentifier): { readonly index: number };
  /** A partition map's hook: writes refused by a former owner are retried at the current one. */
  readonly ownership?: OwnershipHook | undefined;
}

export interface PlannerOptions {
  /** Key fields (and an optional `keyless` policy) per model. */
  models?: Record<string, ModelRouting> | undefined;
  /** What keyless operations do when there are several databases (see `KeylessPolicy`). */
  keyless?: KeylessPolicy | undefined;
  /** Where rows whose IDs are not ShardedUUIDs live (see `ModelRouting.legacy`). */
  legacy?: LegacyIds | undefined;
}

/** Routing options checked before any client is involved: keyless policies parsed. */
export interface RoutingConfig {
  models: Record<string, ModelRouting>;
  legacy: LegacyIds | undefined;
  keyless: KeylessScatterOptions | null;
  keylessPerModel: Map<string, KeylessScatterOptions | null>;
}

/** Checks the options that need no schema; throws `RoutingOptionsError` listing every problem. */
export function routingConfig(options: PlannerOptions): RoutingConfig {
  const issues: string[] = [];
  const keyless = parseKeyless(options.keyless, "keyless", issues) ?? null;
  const keylessPerModel = new Map<string, KeylessScatterOptions | null>();
  for (const [name, routing] of Object.entries(options.models ?? {})) {
    const parsed = parseKeyless(routing?.keyless, `models.${name}.keyless`, issues);
    if (parsed !== undefined) keylessPerModel.set(name, parsed);
  }
  if (issues.length > 0) throw new RoutingOptionsError(issues);
  return { models: options.models ?? {}, legacy: options.legacy, keyless, keylessPerModel };
}

/** The context of a call outside any transaction or action, with no per-call scatter options. */
export const NO_CONTEXT: PlanContext = Object.freeze({});

/**
 * Turns (model, operation, args) into a plan: one shard, one database, a scatter with its merge, a
 * split of writes per database, or a refusal carrying its typed error. Pure: it knows the schema's
 * shape and where shards live, nothing of Prisma's client, and runs nothing.
 */
export class Planner {
  readonly keys: KeyRouting;
  /** Delegate property (`orderItem`) -> model name (`OrderItem`), for every model of the schema. */
  readonly delegates = new Map<string, string>();
  private readonly info = new Map<string, ModelInfo>();
  private readonly config: RoutingConfig;

  /** Throws `RoutingOptionsError` listing every problem of `options` (models or keys the schema lacks). */
  constructor(
    readonly dataModel: DataModel,
    readonly layout: ShardLayout,
    options: PlannerOptions | RoutingConfig = {},
    generateId?: (shard: ShardIdentifier) => string,
  ) {
    this.config = "keylessPerModel" in options ? options : routingConfig(options);
    const issues: string[] = [];
    this.keys = new KeyRouting(dataModel, (shard) => layout.resolve(shard), this.config.models, issues, {
      legacy: this.config.legacy,
      generateId,
      shards: layout.databases.flatMap((p) => p.shards),
    });
    if (issues.length > 0) throw new RoutingOptionsError(issues);
    for (const [name, model] of Object.entries(dataModel.models)) {
      this.info.set(name, { name, fields: model.fields, keys: this.keys.keysOf(name) });
      this.delegates.set(delegateKey(name), name);
    }
  }

  /**
   * The lookups `model.operation(args)` needs answered (into `context.resolved`) before it is
   * planned: the call's resolve step. Pure; none for a call whose keys need no lookup.
   */
  lookups(
    model: string,
    operation: string,
    args: Obj | undefined,
    context: PlanContext = NO_CONTEXT,
  ): Lookup[] {
    return this.keys.lookups(model, operation, args ?? {}, context);
  }

  /** The lookups a `page` read needs answered first (see `lookups`). */
  pageLookups(model: string, args: ScatterPageArgs, resolved: PlanContext["resolved"]): Lookup[] {
    return this.keys.lookups(model, "findMany", { where: args.where }, { resolved });
  }

  /**
   * Decides where `model.operation(args)` runs, once its lookups are answered. Never throws for bad
   * input: that is a `refuse` plan.
   */
  plan(model: string, operation: string, args: Obj | undefined, context: PlanContext = NO_CONTEXT): Plan {
    const a = args ?? {};
    try {
      const named = this.keys.named(model, operation, a, context);
      const run = named.args ?? a;
      if (context.within) return this.within(context.within, named, model, operation);
      switch (named.kind) {
        case "one": {
          const plan: Plan = { kind: "shard", shard: named.shard };
          if (named.args) plan.args = named.args;
          if (named.claims) plan.claims = named.claims;
          return plan;
        }
        case "in":
        case "rows":
          return this.spread(model, operation, run, named, context);
        case "none":
          return this.keylessPlan(model, operation, run, named.hint, context);
      }
    } catch (error) {
      if (isShardkitError(error)) return { kind: "refuse", error };
      throw error;
    }
  }

  /** The pure merge plan of a read over several databases. Throws `UnsupportedShardOperationError`. */
  read(model: string, operation: string, args: Obj): ScatterRead {
    const info = this.info.get(model)!;
    switch (operation) {
      case "findMany":
      case "findFirst":
      case "findFirstOrThrow":
        return planFind(info, operation, args);
      case "count":
        return planCount(info, args);
      case "aggregate":
        return planAggregateRead(info, args);
      case "groupBy":
        return planGroupBy(info, args);
      default:
        throw new UnsupportedShardOperationError(`${model}.${operation} cannot run across shards`);
    }
  }

  /**
   * A keyset page (`db.$scatterPage`): on the shards its `where` names (one shard for a customer's
   * own list), over every shard when it names none; or its refusal.
   */
  page(
    model: string,
    args: ScatterPageArgs,
    options: ScatterReadOptions,
    resolved?: PlanContext["resolved"],
  ): Plan {
    try {
      const read = planPageRead(this.info.get(model)!, args);
      const where = { where: args.where };
      const named = this.keys.named(model, "findMany", where, { resolved });
      let spread: Spread;
      if (named.kind === "one") {
        const one = { where: named.args?.where ?? args.where };
        spread = { shards: [named.shard], argsFor: () => one };
      } else if (named.kind === "in") {
        spread = spreadOf(named, where);
      } else {
        spread = everyShard(this.layout, where);
      }
      return { kind: "shards", spread, write: false, read, options };
    } catch (error) {
      if (isShardkitError(error)) return { kind: "refuse", error };
      throw error;
    }
  }

  /** Inside a transaction on `shard`: the operation runs there, or is refused if it names another shard. */
  private within(shard: ShardIdentifier, named: Named, model: string, operation: string): Plan {
    const shards =
      named.kind === "one" ? [named.shard] : named.kind === "none" ? [] : [...named.byShard.keys()];
    const other = shards.find((s) => s !== shard);
    if (other) {
      throw new CrossShardError(
        `${model}.${operation} names shard ${other.key} inside a transaction on shard ${shard.key}; a transaction never reaches another shard`,
        [shard, other],
      );
    }
    this.layout.resolve(shard); // a transaction's shard is registered: `UnknownShardError` if not
    const plan: Plan = { kind: "shard", shard };
    if (named.args) plan.args = named.args;
    if (named.kind === "one" && named.claims) plan.claims = named.claims;
    return plan;
  }

  /**
   * An `in` list or createMany rows over several shards: one statement per database holding them
   * (placed when it runs), merged by a read planned now if they are on several databases now.
   */
  private spread(
    model: string,
    operation: string,
    args: Obj,
    named: Extract<Named, { kind: "in" | "rows" }>,
    context: PlanContext,
  ): Plan {
    const write = !READS.has(operation);
    const spread = spreadOf(named, args);
    if (write && !context.allowCrossShard) {
      throw new CrossShardError(
        `${model}.${operation} would write to shards ${spread.shards.map((s) => s.key).join(", ")}: writes to several shards are not atomic. ` +
          "Stage them in $action(fn, { allowCrossShard: true }) (one transaction per database, reported per shard), or split the call per shard.",
        [...spread.shards],
      );
    }
    const plan: Plan = { kind: "shards", spread, write, options: {} };
    if (!write && onSeveral(this.layout, spread.shards)) plan.read = this.read(model, operation, args);
    return plan;
  }

  private keylessPlan(model: string, operation: string, args: Obj, hint: string, context: PlanContext): Plan {
    const databases = holding(this.layout);
    if (databases.length === 1) {
      return {
        kind: "shards",
        spread: everyShard(this.layout, args),
        write: !READS.has(operation),
        options: {},
      };
    }
    const options = SCATTER_READS.has(operation) ? this.scatterOptions(model, context.scatter) : null;
    if (!options || this.keys.keysOf(model).length === 0) {
      throw new ShardKeyRequiredError(
        model,
        operation,
        `${hint}. Name the shard with $shard(shardOrId) or $transactionOn(shardOrId, fn).`,
      );
    }
    const targets = databases.map((p) => ({ database: p.index, shards: [...p.shards], args }));
    const max = options.maxShards;
    if (max !== undefined && targets.length > max) {
      throw new ScatterRefusedError(
        model,
        operation,
        "maxShards",
        `a keyless read would scatter over ${targets.length} databases (${targets.map(targetKey).join("; ")}), more than maxShards ${max}. Add a shard key to the query, or override per call with $scatter({ maxShards })`,
      );
    }
    if (
      options.requireLimit &&
      (operation === "findMany" || operation === "groupBy") &&
      args.take === undefined
    ) {
      throw new ScatterRefusedError(
        model,
        operation,
        "requireLimit",
        "a keyless read without `take` would scatter with no limit (requireLimit). Add take, or override per call with $scatter({ requireLimit: false })",
      );
    }
    return {
      kind: "shards",
      spread: everyShard(this.layout, args),
      write: false,
      read: this.read(model, operation, args),
      options,
    };
  }

  /** The scatter options of a keyless read of `model` (per call over per model over global), or null to refuse. */
  scatterOptions(model: string, perCall: ScatterReadOptions | undefined): ScatterReadOptions | null {
    const { keyless, keylessPerModel } = this.config;
    const base = keylessPerModel.has(model) ? keylessPerModel.get(model)! : keyless;
    if (perCall) return { ...(base ?? {}), ...perCall };
    return base;
  }
}

/** `"1/1,1/2 (database #2)"`: how reports and errors name one database of a read. */
export function targetKey(target: { database: number; shards: readonly ShardIdentifier[] }): string {
  return `${target.shards.map((s) => s.key).join(",")} (database #${target.database})`;
}

/** The shards of an `in` list or createMany rows, each taking its own values of the call's args. */
function spreadOf(named: Extract<Named, { kind: "in" | "rows" }>, args: Obj): Spread {
  const shards = [...named.byShard.keys()].sort((x, y) => x.bits - y.bits);
  return {
    shards,
    argsFor: (some) =>
      some.length === shards.length
        ? args
        : cut(
            args,
            named,
            some.flatMap((s) => named.byShard.get(s) ?? []),
          ),
  };
}

/**
 * Every shard held by a database now (a keyless call), each asked the call's own args. Placed, it
 * is read off the databases (see `every`); its list of shards is made only when something asks.
 */
function everyShard(layout: ShardLayout, args: Obj): Spread {
  let shards: ShardIdentifier[] | undefined;
  return {
    every: true,
    get shards() {
      shards ??= holding(layout)
        .flatMap((p) => p.shards)
        .sort((x, y) => x.bits - y.bits);
      return shards;
    },
    argsFor: () => args,
  };
}

/** Whether `shards` are on more than one database now. */
function onSeveral(layout: ShardLayout, shards: readonly ShardIdentifier[]): boolean {
  const first = layout.databaseOf(shards[0]!).index;
  return shards.some((s) => layout.databaseOf(s).index !== first);
}

/** The call's args with its `in` list or rows cut to `values`. */
function cut(args: Obj, named: Extract<Named, { kind: "in" | "rows" }>, values: unknown[]): Obj {
  if (named.kind === "rows") return { ...args, data: values };
  const where = args.where as Obj;
  return { ...args, where: { ...where, [named.field]: { ...(where[named.field] as Obj), in: values } } };
}

/** The databases that hold shards now: a spare (a move's target) or a former owner holds none. */
function holding(layout: ShardLayout) {
  return layout.databases.filter((p) => p.shards.length > 0);
}
