// The routed client a `shardRouting` install returns: a Proxy over Prisma's client whose model
// delegates plan and run every operation through the executor, whose raw SQL and `$transaction`
// run only where the database is unambiguous, and whose `$extends` extends every database's client.
import type { Prisma } from "@prisma/client/extension";
import { ShardKeyRequiredError, UnsupportedShardOperationError } from "./errors.js";
import type { Executor } from "./executor.js";
import { delegateKey } from "./keys/keys.js";
import { lazyReject } from "./lazy.js";
import { OPERATIONS } from "./operations.js";
import type { ShardClient, ShardRegistry } from "./registry.js";
import type { View } from "./scope.js";

const RAW = new Set(["$queryRaw", "$executeRaw", "$queryRawUnsafe", "$executeRawUnsafe", "$queryRawTyped"]);

/** One routed client: the router it shares with every client derived from it, and its own view of the databases. */
export interface Routed {
  executor: Executor;
  registry: ShardRegistry<ShardClient>;
  view: View;
  /** The Prisma client that answers everything that is not routed ($on, $connect, client extensions, ...). */
  target: object;
}

const routedOf = new WeakMap<object, Routed>();

/** The routed client `that` (an extension method's `this`); refused for any other object. */
export function own(that: unknown): Routed {
  const routed = routedOf.get(that as object);
  if (!routed) {
    throw new UnsupportedShardOperationError("call this method on the client that shardRouting returned");
  }
  return routed;
}

/** The routed client: model calls are planned and run by the executor; the rest is Prisma's. */
export function routedClient(routed: Routed): object {
  const { executor, view, target } = routed;
  const single = view.clients.length === 1;
  const delegates = new Map<string, object>();
  const t = target;
  // The Proxy's own target is a plain object, not Prisma's client: V8 checks every `get` against
  // its target's own property, and on Prisma's client (itself a proxy) that check alone cost more
  // than routing the call (about 8 µs a call). Everything not routed is read from `target`.
  const client: object = new Proxy(Object.create(null) as object, {
    getPrototypeOf: () => Object.getPrototypeOf(t),
    has: (_, prop) => prop in t,
    get(_, prop, receiver) {
      if (typeof prop !== "string") return Reflect.get(t, prop, receiver);
      const model = executor.planner.delegates.get(prop);
      if (model !== undefined) {
        let delegate = delegates.get(prop);
        if (!delegate) {
          delegate = routedDelegate(routed, model, () => client);
          delegates.set(prop, delegate);
        }
        return delegate;
      }
      if (RAW.has(prop)) return (...args: unknown[]) => raw(routed, single, prop, args);
      switch (prop) {
        case "$extends":
          return (extension: Parameters<typeof Prisma.defineExtension>[0]) =>
            routedClient({
              ...routed,
              target: (t as { $extends(e: unknown): object }).$extends(extension),
              view: {
                ...view,
                clients: view.clients.map((c) => (c as { $extends(e: unknown): object }).$extends(extension)),
                replicas: view.replicas?.map((list) =>
                  list.map((c) => (c as { $extends(e: unknown): object }).$extends(extension)),
                ),
              },
            });
        case "$transaction":
          return (...args: unknown[]) => {
            if (single && !executor.scope.getStore()) {
              return (view.clients[0] as { $transaction(...a: unknown[]): unknown }).$transaction(...args);
            }
            return lazyReject(
              new UnsupportedShardOperationError(
                "$transaction of the routed client belongs to one database and routed queries would escape it. Use $transactionOn(shardOrId, fn) or $action(fn).",
              ),
            );
          };
      }
      const value = Reflect.get(t, prop, receiver);
      // Prisma's own methods need their client; this extension's methods find the routed client by `this`.
      return typeof value === "function" && !OWN.has(prop) ? value.bind(t) : value;
    },
  });
  routedOf.set(client, routed);
  return client;
}

const OWN = new Set([
  "$shardRegistry",
  "$shardLoad",
  "$scatter",
  "$scatterPage",
  "$primary",
  "$repairClaims",
  "$backfillClaims",
  "$shard",
  "$transactionOn",
  "$command",
  "$action",
  "$recoverAtomic",
]);

/** `db.wallet`: its operations are routed; model extension methods and `fields` are Prisma's. */
function routedDelegate(routed: Routed, model: string, parent: () => object): object {
  const base = Reflect.get(routed.target, delegateKey(model)) as object;
  const operations = new Map<string, (args?: Record<string, unknown>) => PromiseLike<unknown>>();
  // A plain target, as for the client (no invariant check against Prisma's delegate proxy).
  return new Proxy(Object.create(null) as object, {
    getPrototypeOf: () => Object.getPrototypeOf(base),
    has: (_, prop) => prop in base,
    get(_, prop, receiver) {
      const d = base;
      if (typeof prop === "string" && OPERATIONS.has(prop)) {
        let run = operations.get(prop);
        if (!run) {
          run = (args) => routed.executor.run(routed.view, model, prop, args);
          operations.set(prop, run);
        }
        return run;
      }
      if (prop === "$parent") return parent();
      return Reflect.get(d, prop, receiver);
    },
  });
}

/** Raw SQL names no shard: it runs only where the database is unambiguous (one database, outside a shard transaction). */
function raw(routed: Routed, single: boolean, operation: string, args: unknown[]): PromiseLike<unknown> {
  if (routed.executor.scope.getStore()?.kind === "tx") {
    return lazyReject(
      new ShardKeyRequiredError(
        undefined,
        operation,
        `inside a shard transaction use the tx client it hands you (tx.${operation})`,
      ),
    );
  }
  if (single) {
    return (routed.view.clients[0] as Record<string, (...a: unknown[]) => PromiseLike<unknown>>)[operation]!(
      ...args,
    );
  }
  return lazyReject(
    new ShardKeyRequiredError(
      undefined,
      operation,
      `raw SQL names no shard; use $shard(shardOrId).${operation}. Name the shard with $shard(shardOrId) or $transactionOn(shardOrId, fn).`,
    ),
  );
}
