import { Prisma } from "@prisma/client/extension";
import { type ActionOptions, type ActionUnit, runAction } from "./action.js";
import { dataModelOf } from "./data-model.js";
import { UnsupportedShardOperationError } from "./errors.js";
import { ShardExecutor, shardScope } from "./execute.js";
import { prismaCallInfo, unpackFluent } from "./internals.js";
import type { ShardClient, ShardOrId, ShardRegistry } from "./registry.js";
import { type ModelRouting, Router } from "./router.js";
import { runInShardTransaction, type TransactionClient, type TransactionOptions } from "./transaction.js";

export interface ShardRoutingOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Key fields per model (Prisma model names); models not listed are routed by a String `id`. */
  models?: Record<string, ModelRouting>;
  /**
   * What an operation whose arguments name no shard does when the registry has more than one
   * database: `'refuse'` (the only policy for now) throws `ShardKeyRequiredError`. With one
   * database it simply runs there.
   */
  keyless?: "refuse";
}

const RAW_OPERATIONS = ["$queryRaw", "$executeRaw", "$queryRawUnsafe", "$executeRawUnsafe"] as const;

/**
 * A Prisma client extension that routes every model operation to the shard its key names.
 *
 * ```ts
 * const db = registry.physical[0].client.$extends(shardRouting({ registry, models: { Wallet: { keys: ["id", "customerId"] } } }));
 * await db.wallet.findUnique({ where: { id } }); // runs on the database holding id's shard
 * ```
 */
export function shardRouting<Client extends ShardClient>(options: ShardRoutingOptions<Client>) {
  const { registry } = options;
  if (options.keyless !== undefined && options.keyless !== "refuse") {
    throw new TypeError(`shardRouting: keyless must be 'refuse', got ${JSON.stringify(options.keyless)}`);
  }
  const dataModel = dataModelOf(registry.physical[0]!.client);
  const router = new Router(dataModel, (shard) => registry.resolve(shard), options.models);
  const executor = new ShardExecutor(registry, router, Object.keys(dataModel.models));
  const single = registry.physical.length === 1;

  const rawHook = (operation: (typeof RAW_OPERATIONS)[number]) =>
    async ({ args, query }: { args: any; query: (args: any) => Promise<unknown> }) => {
      // Raw SQL carries no key: it runs only where the database is unambiguous.
      const scope = shardScope.getStore();
      const hint =
        scope?.kind === "tx"
          ? `inside a shard transaction use the tx client it hands you (tx.${operation})`
          : `raw SQL names no shard; use $shard(shardOrId).${operation}`;
      executor.keylessClient(undefined, operation, hint);
      return query(args);
    };

  return Prisma.defineExtension({
    name: "@shardkit/prisma",
    query: {
      $allModels: {
        async $allOperations(params) {
          const { model, operation, query } = params;
          const args = params.args as Record<string, unknown>;
          const call = prismaCallInfo(params);
          if (!shardScope.getStore() && (call.inTransaction || single)) {
            if (!single) {
              throw new UnsupportedShardOperationError(
                `${model}.${operation} inside $transaction of the routed client: that transaction belongs to one database and routed queries would escape it. Use $transactionOn(shardOrId, fn) or $action(fn).`,
              );
            }
            // One database: keys are still checked (an ID of an unknown shard is refused), then the
            // call runs exactly as on the plain client.
            executor.router.plan(model, operation, args);
            return query(params.args);
          }
          const result = await executor.run(model, operation, args);
          return call.fluentPath.length > 0 ? unpackFluent(result, call.fluentPath) : result;
        },
      },
      $queryRaw: rawHook("$queryRaw"),
      $executeRaw: rawHook("$executeRaw"),
      $queryRawUnsafe: rawHook("$queryRawUnsafe"),
      $executeRawUnsafe: rawHook("$executeRawUnsafe"),
    },
    client: {
      /** The registry this client routes with. */
      $shardRegistry(): ShardRegistry<Client> {
        return registry;
      },
      /** The (unrouted) client of the database that holds the shard or ID. */
      $shard(shardOrId: ShardOrId): Client {
        return registry.clientFor(shardOrId);
      },
      /**
       * An interactive transaction on one shard. Inside it, routed queries (through `tx` or this
       * client) run in the transaction; a key that names another shard throws `CrossShardError`.
       */
      $transactionOn<R>(
        shardOrId: ShardOrId,
        fn: (tx: TransactionClient<Client>) => Promise<R>,
        txOptions: TransactionOptions = {},
      ): Promise<R> {
        return runInShardTransaction(executor, registry.resolve(shardOrId), txOptions, (tx) =>
          fn(tx as TransactionClient<Client>),
        );
      },
      /**
       * A unit of work: `fn` stages writes on `unit`; then they run grouped by shard, one
       * transaction per shard. Several shards throw `CrossShardError` before anything is written
       * unless `allowCrossShard` is set (then: shard-bits order, `PartialCommitError` on failure).
       */
      $action<R>(fn: (unit: ActionUnit<Client>) => Promise<R> | R, actionOptions: ActionOptions = {}): Promise<R> {
        return runAction(executor, fn, actionOptions);
      },
    },
  });
}
