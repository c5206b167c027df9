// What the executor shares with the modules it runs (claims, shard transactions, actions): the
// types of a call, a routed client's view and the scope an async context is in, and what a shard
// transaction needs of the executor. Declared here, below all of them, so none imports the executor.
import type { AsyncLocalStorage } from "node:async_hooks";
import type { ShardIdentifier } from "@shardkit/id";
import type { Planner } from "./planner.js";
import type { ScatterReadOptions } from "./scatter/options.js";
import type { Telemetry } from "./telemetry.js";

/** Runs one model operation on one Prisma client (a database's client, or a transaction's). */
export type Call = (client: object, model: string, operation: string, args: unknown) => PromiseLike<unknown>;

/**
 * One routed client's view of the databases: each database's fully configured client (with the
 * extensions added after routing), its read replicas' clients (likewise; absent when no database
 * has any, and in `db.$primary()`) and the per-call scatter options of `db.$scatter(options)`.
 */
export interface View {
  readonly clients: readonly object[];
  readonly replicas?: readonly (readonly object[])[] | undefined;
  readonly scatter?: ScatterReadOptions | undefined;
}

/**
 * What the current async context is inside: a shard transaction (opened by `$transactionOn`, or
 * by `$action` while it commits) or an action's staging function.
 */
export type Scope =
  | { kind: "tx"; shard: ShardIdentifier; tx: object; guarded: object; view?: View | undefined }
  | { kind: "staging" };

/** What a shard transaction needs of the executor that routes its calls (`Executor` is one). */
export interface ShardScopes {
  /** The scope of the current async context, for one routed client. */
  readonly scope: AsyncLocalStorage<Scope>;
  readonly planner: Planner;
  readonly telemetry?: Telemetry | undefined;
  /** `run()`, a statement on database `database`, bounded by the routed client's `timeoutMs`. */
  bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T>;
  /** Runs `model.operation(args)` in the transaction `tx` on `shard`, after checking it names no other shard. */
  runIn(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
    view?: View,
  ): PromiseLike<unknown>;
}
