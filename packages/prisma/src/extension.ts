import { Prisma } from "@prisma/client/extension";
import { type ActionOptions, type ActionUnit, runAction } from "./action.js";
import { dataModelOf } from "./data-model.js";
import { RegistryConfigError, ShardKeyRequiredError, UnsupportedShardOperationError } from "./errors.js";
import { callModel, ShardExecutor, shardScope } from "./execute.js";
import { prismaCallInfo, unpackFluent } from "./internals.js";
import type { ShardClient, ShardOrId, ShardRegistry } from "./registry.js";
import { type ModelRouting, Router } from "./router.js";
import {
  type KeylessPolicy,
  type KeylessScatterOptions,
  parseKeyless,
  type ScatterReadOptions,
  ScatterReads,
  scatterView,
} from "./scatter-reads.js";
import { runInShardTransaction, type TransactionClient, type TransactionOptions } from "./transaction.js";

export interface ShardRoutingOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Key fields (and an optional `keyless` policy) per model (Prisma model names); models not listed are routed by a String `id`. */
  models?: Record<string, ModelRouting>;
  /**
   * What an operation whose arguments name no shard does when the registry has more than one
   * database: `'refuse'` (default) throws `ShardKeyRequiredError`; `'scatter'` or
   * `{ mode: 'scatter', maxShards?, requireLimit?, policy?, concurrency?, deadlineMs?, onReport? }`
   * runs keyless `findMany`, `findFirst(OrThrow)`, `count`, `aggregate` and `groupBy` on every
   * database and merges them exactly. Keyless writes are always refused. With one database every
   * keyless operation simply runs there. Per model: `models: { Wallet: { keyless } }`; per call:
   * `db.$scatter(options)`.
   */
  keyless?: KeylessPolicy;
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
  const issues: string[] = [];
  const keyless = parseKeyless(options.keyless, "keyless", issues) ?? null;
  const perModel: Record<string, KeylessScatterOptions | null> = {};
  for (const [name, routing] of Object.entries(options.models ?? {})) {
    const parsed = parseKeyless(routing?.keyless, `models.${name}.keyless`, issues);
    if (parsed !== undefined) perModel[name] = parsed;
  }
  if (issues.length > 0) throw new RegistryConfigError(issues);
  const dataModel = dataModelOf(registry.physical[0]!.client);
  const router = new Router(dataModel, (shard) => registry.resolve(shard), options.models);
  const reads = new ScatterReads(
    dataModel,
    (model) => router.keysOf(model),
    (id) => registry.clientFor(id),
    callModel,
    keyless,
    perModel,
  );
  const executor = new ShardExecutor(registry, router, Object.keys(dataModel.models), reads);
  const single = registry.physical.length === 1;

  return Prisma.defineExtension((base) => {
    // When the extension is installed on one of the registry's clients, queries for the shards that
    // client holds run through the hook's own `query`: no second trip through Prisma, and Prisma's
    // fluent API and `$transaction` work on them as on the plain client.
    const own = registry.physical.some((p) => (p.client as unknown) === base) ? base : undefined;
    // Raw SQL carries no key: it runs only where the database is unambiguous (one database, and
    // the extension installed on its client); inside a shard transaction, through its tx client.
    const rawHook =
      (operation: (typeof RAW_OPERATIONS)[number]) =>
      async ({ args, query }: { args: any; query: (args: any) => Promise<unknown> }) => {
        const hint =
          shardScope.getStore()?.kind === "tx"
            ? `inside a shard transaction use the tx client it hands you (tx.${operation})`
            : `raw SQL names no shard; use $shard(shardOrId).${operation}`;
        if (
          shardScope.getStore()?.kind === "tx" ||
          (executor.keylessClient(undefined, operation, hint) as unknown) !== own
        ) {
          throw new ShardKeyRequiredError(undefined, operation, hint);
        }
        return query(args);
      };
    return base.$extends({
      name: "@shardkit/prisma",
      query: {
        $allModels: {
          $allOperations(params) {
            const { model, operation, query } = params;
            const call = prismaCallInfo(params);
            try {
              if (call.inTransaction && !shardScope.getStore() && !(single && own)) {
                throw new UnsupportedShardOperationError(
                  `${model}.${operation} inside $transaction of the routed client: that transaction belongs to one database and routed queries would escape it. Use $transactionOn(shardOrId, fn) or $action(fn).`,
                );
              }
              let direct = false;
              const local = own && {
                client: own,
                query: (a: unknown) => {
                  direct = true;
                  return query(a as typeof params.args);
                },
              };
              const pending = executor.run(
                model,
                operation,
                params.args as Record<string, unknown>,
                local || undefined,
              );
              // A call that ran on another client comes back whole: cut out a fluent relation ourselves.
              return direct || call.fluentPath.length === 0
                ? pending
                : pending.then((result) => unpackFluent(result, call.fluentPath));
            } catch (error) {
              return Promise.reject(error);
            }
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
        /**
         * A view of this client whose keyless reads scatter over every database with `options`
         * (overriding the `keyless` setting and its guard for the calls made through the view):
         * `await db.$scatter({ policy: "partial", onReport }).wallet.findMany({ take: 20 })`.
         */
        $scatter<This>(this: This, scatterOptions: ScatterReadOptions = {}): This {
          return scatterView(
            Prisma.getExtensionContext(this) as This & object,
            (key) => executor.isDelegate(key),
            scatterOptions,
          );
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
        $action<R>(
          fn: (unit: ActionUnit<Client>) => Promise<R> | R,
          actionOptions: ActionOptions = {},
        ): Promise<R> {
          return runAction(executor, fn, actionOptions);
        },
      },
    });
  });
}
