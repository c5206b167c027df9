import { AsyncLocalStorage } from "node:async_hooks";
import type { ShardIdentifier } from "@shardkit/id";
import { CrossShardError, ShardKeyRequiredError, UnsupportedShardOperationError } from "./errors.js";
import type { ShardClient, ShardRegistry } from "./registry.js";
import type { Router } from "./router.js";
import { databaseTargets, type ReadTarget, SCATTER_READS, type ScatterReads } from "./scatter-reads.js";

type Obj = Record<string, unknown>;

/** The client a routing extension is installed on, and the query hook's `query` for the current call. */
export interface LocalClient {
  client: object;
  query(args: unknown): Promise<unknown>;
}
type Delegate = Record<string, (args?: unknown) => Promise<unknown>>;

/**
 * What the current async context is inside: a shard transaction (set by `$transactionOn` and by
 * `$action` while it commits) or an action's staging function.
 */
export type ShardScope =
  | { kind: "tx"; shard: ShardIdentifier; tx: object; guarded: object }
  | { kind: "staging" };

/** One per routed client; also read by the transaction guard. */
export const shardScope = new AsyncLocalStorage<ShardScope>();

const WRITES = new Set([
  "create",
  "createMany",
  "createManyAndReturn",
  "update",
  "updateMany",
  "updateManyAndReturn",
  "upsert",
  "delete",
  "deleteMany",
]);

/** `OrderItem` -> `orderItem`: the delegate property of a model on a Prisma client. */
export function delegateKey(model: string): string {
  return model.charAt(0).toLowerCase() + model.slice(1);
}

export function callModel(client: object, model: string, operation: string, args: unknown): Promise<unknown> {
  const delegate = (client as Record<string, Delegate | undefined>)[delegateKey(model)];
  const fn = delegate?.[operation];
  if (typeof fn !== "function") {
    throw new UnsupportedShardOperationError(`${model}.${operation} does not exist on the shard's client`);
  }
  return fn.call(delegate, args);
}

/** Runs routed model operations: one shard, a split over several, or inside a shard transaction. */
export class ShardExecutor<Client extends ShardClient> {
  /** delegate key (`orderItem`) -> model name (`OrderItem`) */
  private readonly models: Map<string, string>;

  constructor(
    readonly registry: ShardRegistry<Client>,
    readonly router: Router,
    modelNames: readonly string[],
    /** Reads that span databases: keyless scatter and `in` lists over several shards. */
    readonly reads: ScatterReads,
  ) {
    this.models = new Map(modelNames.map((name) => [delegateKey(name), name]));
  }

  isDelegate(key: string): boolean {
    return this.models.has(key);
  }

  /** The model name of a delegate key; throws for anything that is not a model of the schema. */
  modelOf(delegate: string): string {
    const model = this.models.get(delegate);
    if (model === undefined) {
      throw new UnsupportedShardOperationError(`${delegate} is not a model delegate of this Prisma schema`);
    }
    return model;
  }

  /**
   * Runs a routed model operation. `local` is the client the extension is installed on with the
   * hook's `query`: an operation for a shard that client holds runs through `query`, without a
   * second trip through Prisma.
   */
  run(model: string, operation: string, args: Obj | undefined, local?: LocalClient): Promise<unknown> {
    const scope = shardScope.getStore();
    if (scope?.kind === "tx") return this.callInScope(scope.tx, scope.shard, model, operation, args);
    if (scope?.kind === "staging" && WRITES.has(operation)) {
      throw new UnsupportedShardOperationError(
        `${model}.${operation} inside $action runs immediately and outside the action's transaction; stage it (unit.${operation}("${delegateKey(model)}", args)) instead`,
      );
    }
    const plan = this.router.plan(model, operation, args);
    switch (plan.kind) {
      case "shard":
        return this.callOn(this.registry.clientFor(plan.shard), model, operation, args, local);
      case "split": {
        // Shards that all live in one database: the read as written is exact there, in one query
        // (and inside the client's own transaction in single-database mode).
        const client = this.registry.clientFor(plan.parts[0]!.shard);
        if (
          SCATTER_READS.has(operation) &&
          plan.parts.every((p) => this.registry.clientFor(p.shard) === client)
        ) {
          return this.callOn(client, model, operation, args, local);
        }
        return this.runSplit(model, operation, args ?? {}, plan.parts);
      }
      case "keyless": {
        // Keyless reads scatter over every database when the policy says so; writes never do.
        if (SCATTER_READS.has(operation) && this.registry.physical.length > 1) {
          const options = this.reads.optionsFor(model);
          if (options && this.router.keysOf(model).length > 0) {
            const targets = databaseTargets(this.registry.physical);
            this.reads.guard(model, operation, args ?? {}, targets, options);
            return this.reads.read(model, operation, args ?? {}, targets, options);
          }
        }
        return this.callOn(this.keylessClient(model, operation, plan.hint), model, operation, args, local);
      }
    }
  }

  private callOn(client: Client, model: string, operation: string, args: unknown, local?: LocalClient) {
    return local?.client === client ? local.query(args) : callModel(client, model, operation, args);
  }

  /** Runs a model operation in the transaction `tx` on `shard`, after checking it names no other shard. */
  callInScope(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
  ): Promise<unknown> {
    const plan = this.router.plan(model, operation, args as Obj | undefined);
    const named =
      plan.kind === "shard" ? [plan.shard] : plan.kind === "split" ? plan.parts.map((p) => p.shard) : [];
    const other = named.find((s) => s !== shard);
    if (other) {
      throw new CrossShardError(
        `${model}.${operation} names shard ${other.key} inside a transaction on shard ${shard.key}; a transaction never reaches another shard`,
        [shard, other],
      );
    }
    return callModel(tx, model, operation, args);
  }

  /** Where an operation with no shard key may run: the only database, or nowhere. */
  keylessClient(model: string | undefined, operation: string, hint: string): Client {
    if (this.registry.physical.length === 1) return this.registry.physical[0]!.client;
    throw new ShardKeyRequiredError(
      model,
      operation,
      `${hint}. Name the shard with $shard(shardOrId) or $transactionOn(shardOrId, fn).`,
    );
  }

  private async runSplit(
    model: string,
    operation: string,
    args: Obj,
    parts: { shard: ShardIdentifier; args: Obj }[],
  ): Promise<unknown> {
    const shards = parts.map((p) => p.shard);
    if (!SCATTER_READS.has(operation)) {
      throw new CrossShardError(
        `${model}.${operation} would write to shards ${shards.map((s) => s.key).join(", ")}: writes to several shards are not atomic. ` +
          "Stage them in $action(fn, { allowCrossShard: true }) (one transaction per shard, reported exactly), or split the call per shard.",
        shards,
      );
    }
    const targets: ReadTarget[] = parts.map((p) => ({
      key: `${p.shard.key} (database #${this.registry.physicalOf(p.shard).index})`,
      shards: [p.shard],
      client: this.registry.clientFor(p.shard),
      args: p.args,
    }));
    return this.reads.read(model, operation, args, targets, {});
  }
}
