import type { ShardIdentifier } from "@shardkit/id";
import { CrossShardError } from "./errors.js";
import { type ShardExecutor, shardScope } from "./execute.js";
import type { ShardClient } from "./registry.js";

/** The client an interactive `$transaction(fn)` of `Client` hands to `fn`. */
export type TransactionClient<Client> = Client extends {
  $transaction(fn: (tx: infer Tx) => any, ...rest: any[]): any;
}
  ? Tx
  : never;

/** Options of an interactive transaction, passed to Prisma's `$transaction`. */
export interface TransactionOptions {
  maxWait?: number;
  timeout?: number;
  isolationLevel?: string;
}

type Interactive = { $transaction(fn: (tx: object) => Promise<unknown>, options?: object): Promise<unknown> };

/**
 * Runs `fn` in one interactive transaction on `shard`'s database. While it runs, every routed
 * query in the same async context (through the routed client or the `tx` it receives) must name
 * `shard` or no shard, and runs in the transaction; a key for another shard throws `CrossShardError`.
 */
export async function runInShardTransaction<Client extends ShardClient, R>(
  executor: ShardExecutor<Client>,
  shard: ShardIdentifier,
  options: TransactionOptions,
  fn: (tx: object) => Promise<R>,
): Promise<R> {
  const scope = shardScope.getStore();
  if (scope?.kind === "tx") {
    if (scope.shard !== shard) {
      throw new CrossShardError(
        `A transaction on shard ${shard.key} was opened inside a transaction on shard ${scope.shard.key}`,
        [scope.shard, shard],
      );
    }
    return fn(scope.guarded);
  }
  const client = executor.registry.clientFor(shard) as unknown as Interactive;
  return (await client.$transaction((tx) => {
    const guarded = guardTransaction(executor, tx, shard);
    // `async`/`await` inside run(): Prisma's promises are lazy, so a query returned unawaited
    // from fn must still start inside the scope.
    return shardScope.run({ kind: "tx", shard, tx, guarded }, async () => await fn(guarded));
  }, cleanOptions(options))) as R;
}

function cleanOptions(options: TransactionOptions): object | undefined {
  const out: Record<string, unknown> = {};
  if (options.maxWait !== undefined) out.maxWait = options.maxWait;
  if (options.timeout !== undefined) out.timeout = options.timeout;
  if (options.isolationLevel !== undefined) out.isolationLevel = options.isolationLevel;
  return Object.keys(out).length ? out : undefined;
}

/**
 * Wraps a transaction client so each model operation is checked against the transaction's shard
 * before it runs; everything else (raw queries, ...) passes through.
 */
function guardTransaction<Client extends ShardClient>(
  executor: ShardExecutor<Client>,
  tx: object,
  shard: ShardIdentifier,
): object {
  const delegates = new Map<string, object>();
  return new Proxy(tx, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof prop !== "string" || !executor.isDelegate(prop)) {
        return typeof value === "function" ? value.bind(target) : value;
      }
      let delegate = delegates.get(prop);
      if (!delegate) {
        const model = executor.modelOf(prop);
        delegate = new Proxy(value as object, {
          get(d, operation, r) {
            const method = Reflect.get(d, operation, r);
            if (typeof operation !== "string" || typeof method !== "function") return method;
            return (args?: Record<string, unknown>) =>
              executor.callInScope(tx, shard, model, operation, args);
          },
        });
        delegates.set(prop, delegate);
      }
      return delegate;
    },
  });
}
