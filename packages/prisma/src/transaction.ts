import type { ShardIdentifier } from "@shardkit/id";
import { CrossShardError, UnsupportedShardOperationError } from "./errors.js";
import { withCurrentOwner } from "./ownership.js";
import { retry } from "./retry.js";
import type { ShardScopes, View } from "./scope.js";
import { isTransientTransactionError } from "./unavailable.js";

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
  /**
   * How many times to run the transaction again when it failed on a race it may win next time: a
   * deadlock, a serialization failure, no transaction slot in time (`isTransientTransactionError`).
   * Each run is a new transaction (the failed one rolled back), so `fn` must do nothing outside it
   * that cannot be repeated. Default 0. Retries wait 10, 20, 40, ... ms (at most 500), with jitter.
   */
  retries?: number;
}

type Interactive = { $transaction(fn: (tx: object) => Promise<unknown>, options?: object): Promise<unknown> };

/**
 * Runs `fn` in one interactive transaction on `shard`'s database. While it runs, every routed
 * query in the same async context (through the routed client or the `tx` it receives) must name
 * `shard` or no shard, and runs in the transaction; a key for another shard throws `CrossShardError`.
 */
export async function runInShardTransaction<R>(
  executor: ShardScopes,
  view: View,
  shard: ShardIdentifier,
  options: TransactionOptions,
  fn: (tx: object) => Promise<R>,
): Promise<R> {
  const scope = executor.scope.getStore();
  if (scope?.kind === "tx") {
    if (scope.shard !== shard) {
      throw new CrossShardError(
        `A transaction on shard ${shard.key} was opened inside a transaction on shard ${scope.shard.key}`,
        [scope.shard, shard],
      );
    }
    return fn(scope.guarded);
  }
  if (scope?.kind === "staging") {
    throw new UnsupportedShardOperationError(
      "$transactionOn inside $action commits at once, outside the action: stage the work with unit.on(shardOrId, fn) instead",
    );
  }
  const { layout } = executor.planner;
  // A former owner refuses the transaction's writes (a partition map's fence): refresh and run it
  // again at the current owner, like a lost race but counted apart (the hook bounds it).
  return withCurrentOwner(
    layout.ownership,
    async () => {
      const admitted = layout.ownership?.admit?.(shard, { write: true });
      if (admitted) await admitted;
      // A lost race (deadlock, serialization failure, no slot in time): a new transaction, after a wait.
      return retry(
        () => {
          const database = layout.databaseOf(shard).index;
          const begin = layout.ownership?.begin;
          return inDatabaseTransaction(view, database, options, async (tx) => {
            if (begin) await executor.bounded(database, () => begin(tx, shard));
            return inShard(executor, tx, shard, fn, view);
          });
        },
        { retries: options.retries ?? 0, retryable: isTransientTransactionError },
      );
    },
    executor.telemetry,
  );
}

/** One interactive transaction on a database, through its fully configured client. */
export async function inDatabaseTransaction<R>(
  view: View,
  database: number,
  options: TransactionOptions,
  fn: (tx: object) => Promise<R>,
): Promise<R> {
  const client = view.clients[database] as Interactive;
  return (await client.$transaction(fn, cleanOptions(options))) as R;
}

/** Runs `fn` with `tx` as the scope of `shard`: routed calls join it, calls for other shards are refused. */
export function inShard<R>(
  executor: ShardScopes,
  tx: object,
  shard: ShardIdentifier,
  fn: (tx: object) => Promise<R>,
  view?: View,
) {
  const guarded = guardTransaction(executor, tx, shard, view);
  // Calls are routed when they are made (inside the scope), so a lazy Prisma promise that `fn`
  // returns unawaited is already bound to `tx` when it starts.
  return executor.scope.run({ kind: "tx", shard, tx, guarded, view }, () => fn(guarded));
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
function guardTransaction(
  executor: ShardScopes,
  tx: object,
  shard: ShardIdentifier,
  view: View | undefined,
): object {
  const delegates = new Map<string, object>();
  const models = executor.planner.delegates;
  // Plain Proxy targets: V8 checks each `get` against the target's own property, and on Prisma's
  // transaction client (itself a proxy) that check costs more than the guard.
  return new Proxy(Object.create(null) as object, {
    getPrototypeOf: () => Object.getPrototypeOf(tx),
    has: (_, prop) => prop in tx,
    get(_, prop) {
      const value = Reflect.get(tx, prop);
      const model = typeof prop === "string" ? models.get(prop) : undefined;
      if (model === undefined) return typeof value === "function" ? value.bind(tx) : value;
      let delegate = delegates.get(model);
      if (!delegate) {
        const base = value as object;
        const operations = new Map<string, (args?: Record<string, unknown>) => PromiseLike<unknown>>();
        delegate = new Proxy(Object.create(null) as object, {
          getPrototypeOf: () => Object.getPrototypeOf(base),
          has: (__, operation) => operation in base,
          get(__, operation) {
            const method = Reflect.get(base, operation);
            if (typeof operation !== "string" || typeof method !== "function") return method;
            let run = operations.get(operation);
            if (!run) {
              run = (args) => executor.runIn(tx, shard, model, operation, args, view);
              operations.set(operation, run);
            }
            return run;
          },
        });
        delegates.set(model, delegate);
      }
      return delegate;
    },
  });
}
