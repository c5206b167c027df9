import { AsyncLocalStorage } from "node:async_hooks";
import type { ShardIdentifier } from "@shardkit/id";
import { type ScatterResult, scatter } from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "./errors.js";
import { isPrismaValidationError } from "./internals.js";
import { delegateKey } from "./keys.js";
import { withCurrentOwner } from "./ownership.js";
import type { Obj, Plan, PlanTarget } from "./plan.js";
import { NO_CONTEXT, type Planner, targetKey, WRITES } from "./planner.js";
import type { ScatterReadOptions, ScatterReport, ScatterTargetReport } from "./scatter/options.js";
import { isShardUnavailable } from "./unavailable.js";

/** Runs one model operation on one Prisma client (a database's client, or a transaction's). */
export type Call = (client: object, model: string, operation: string, args: unknown) => PromiseLike<unknown>;

/**
 * One routed client's view of the databases: each database's fully configured client (with the
 * extensions added after routing) and the per-call scatter options of `db.$scatter(options)`.
 */
export interface View {
  readonly clients: readonly object[];
  readonly scatter?: ScatterReadOptions | undefined;
}

/**
 * What the current async context is inside: a shard transaction (opened by `$transactionOn`, or
 * by `$action` while it commits) or an action's staging function.
 */
export type Scope = { kind: "tx"; shard: ShardIdentifier; tx: object; guarded: object } | { kind: "staging" };

/** Calls `client[delegate][operation](args)`: Prisma's own pipeline, once. */
export const callModel: Call = (client, model, operation, args) => {
  const delegate = (
    client as Record<string, Record<string, (a: unknown) => PromiseLike<unknown>> | undefined>
  )[delegateKey(model)];
  const fn = delegate?.[operation];
  if (typeof fn !== "function") {
    return lazyReject(
      new UnsupportedShardOperationError(`${model}.${operation} does not exist on the shard's client`),
    );
  }
  return fn.call(delegate, args);
};

/**
 * Runs plans. It never decides where a call goes (the planner does); it runs a plan through the
 * injected `call` and owns the scope of one routed client: the shard transaction or action the
 * current async context is in. Two routed clients never share a scope.
 */
export class Executor {
  readonly scope = new AsyncLocalStorage<Scope>();
  private readonly nullable = new Map<string, boolean>();

  constructor(
    readonly planner: Planner,
    private readonly call: Call = callModel,
  ) {}

  /** Plans and runs `model.operation(args)` for a call through the routed client. */
  run(view: View, model: string, operation: string, args: Obj | undefined): PromiseLike<unknown> {
    const scope = this.scope.getStore();
    if (scope?.kind === "staging" && WRITES.has(operation)) {
      return lazyReject(
        new UnsupportedShardOperationError(
          `${model}.${operation} inside $action runs immediately and outside the action's transaction; stage it (unit.${operation}("${delegateKey(model)}", args)) instead`,
        ),
      );
    }
    if (scope?.kind === "tx") return this.runIn(scope.tx, scope.shard, model, operation, args);
    const context = view.scatter ? { scatter: view.scatter } : NO_CONTEXT;
    const plan = this.planner.plan(model, operation, args, context);
    const hook = this.planner.placement.ownership;
    if (hook && WRITES.has(operation) && (plan.kind === "shard" || plan.kind === "database")) {
      // A former owner refuses the write: refresh the map, plan again, run at the current owner.
      let next: Plan | undefined = plan;
      return lazy(() =>
        withCurrentOwner(hook, () => {
          const current = next ?? this.planner.plan(model, operation, args, context);
          next = undefined;
          return this.execute(current, view, model, operation, args);
        }),
      );
    }
    return this.execute(plan, view, model, operation, args);
  }

  /** Runs `model.operation(args)` in the transaction `tx` on `shard`, after checking it names no other shard. */
  runIn(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
  ): PromiseLike<unknown> {
    const plan = this.planner.plan(model, operation, args as Obj | undefined, { within: shard });
    if (plan.kind === "refuse") return lazyReject(plan.error);
    return this.call(tx, model, operation, args);
  }

  /** Runs `model.operation(args)` on `client` as it is, already planned (an action's staged statement). */
  callOn(client: object, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    return this.call(client, model, operation, args);
  }

  /** Runs a plan made outside any transaction. */
  execute(plan: Plan, view: View, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    switch (plan.kind) {
      case "shard":
        return this.call(view.clients[plan.database]!, model, operation, args);
      case "database":
        return this.call(view.clients[plan.target.database]!, model, operation, plan.target.args);
      case "scatter":
        return lazy(() => this.scatter(view, model, operation, plan));
      case "split":
        return lazyReject(
          new UnsupportedShardOperationError(
            `${model}.${operation}: writes over several databases run only in $action`,
          ),
        );
      case "refuse":
        return lazyReject(plan.error);
    }
  }

  private async scatter(
    view: View,
    model: string,
    operation: string,
    plan: Extract<Plan, { kind: "scatter" }>,
  ): Promise<unknown> {
    let read = plan.read;
    if (read.prepare) {
      const step = read.prepare;
      let row: Obj | null = null;
      let client = view.clients[plan.targets[0]!.database]!;
      if (step.row) {
        const { placement } = this.planner;
        client = view.clients[placement.physicalOf(placement.resolve(step.row.shard)).index]!;
        row = (await this.call(client, model, "findUnique", step.row.lookup)) as Obj | null;
      }
      const nullable = new Set<string>();
      if (row || !step.row) {
        for (const field of step.fields) {
          if (row?.[field] === null || (await this.isNullable(client, model, field))) nullable.add(field);
        }
      }
      const next = step.resume(row, nullable);
      if (next === null) return this.finish(view, model, read, read.merge([]), plan.targets);
      read = next;
    }
    const { options } = plan;
    const current = read;
    // A database that is down or slow is missing; a database that refuses the query itself (bad
    // input that reached it, a constraint) fails the whole read with its own error, as one database
    // would: a client must not be able to pass its own mistake off as an outage.
    let refused: { error: unknown } | undefined;
    const result = await scatter(
      plan.targets,
      async (target) => {
        try {
          return await this.call(
            view.clients[target.database]!,
            model,
            current.operation,
            current.argsFor(target),
          );
        } catch (error) {
          if (!refused && !isShardUnavailable(error)) refused = { error };
          throw error;
        }
      },
      {
        policy: options.policy ?? "fail",
        ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
        ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}),
        key: targetKey,
      },
    ).catch((error: unknown) => {
      throw refused ? refused.error : error;
    });
    if (refused) throw refused.error;
    const merged = current.merge(result.values);
    if (options.onReport) options.onReport(report(model, operation, result));
    const answered = result.outcomes.filter((o) => o.status === "fulfilled").map((o) => o.target);
    return this.finish(view, model, current, merged, answered.length > 0 ? answered : plan.targets);
  }

  /** A `findFirstOrThrow` that found nothing raises Prisma's own not-found error, from a database that answered. */
  private finish(
    view: View,
    model: string,
    read: { orThrow?: boolean },
    merged: unknown,
    answered: readonly PlanTarget[],
  ): unknown {
    if (merged !== null || !read.orThrow) return merged;
    return this.call(view.clients[answered[0]!.database]!, model, "findFirstOrThrow", {
      where: { id: { in: [] } },
    });
  }

  /**
   * Whether a scalar field may hold null. Prisma's runtime data model does not say, and Prisma
   * refuses `{ field: null }` for a required field, so ask once per field (a query that matches
   * nothing; a required field fails Prisma's validation before reaching the database).
   */
  private async isNullable(client: object, model: string, field: string): Promise<boolean> {
    const key = `${model}.${field}`;
    let known = this.nullable.get(key);
    if (known === undefined) {
      try {
        await this.call(client, model, "findFirst", {
          where: { AND: [{ [field]: null }, { id: { in: [] } }] },
          select: { id: true },
        });
        known = true;
      } catch (error) {
        if (!isPrismaValidationError(error)) throw error;
        known = false;
      }
      this.nullable.set(key, known);
    }
    return known;
  }
}

function report(model: string, operation: string, result: ScatterResult<PlanTarget, unknown>): ScatterReport {
  const targets: ScatterTargetReport[] = result.outcomes.map((o) =>
    o.status === "fulfilled"
      ? {
          key: o.key,
          shards: o.target.shards,
          status: o.status,
          durationMs: o.durationMs,
          ...(o.rows !== undefined ? { rows: o.rows } : {}),
        }
      : {
          key: o.key,
          shards: o.target.shards,
          status: o.status,
          reason: o.reason,
          error: o.error,
          durationMs: o.durationMs,
        },
  );
  const missing = targets.filter((t) => t.status === "missing");
  return {
    model,
    operation,
    complete: result.complete,
    missing,
    missingShards: missing.flatMap((t) => t.shards).sort((a, b) => a.bits - b.bits),
    targets,
    durationMs: result.durationMs,
  };
}

/**
 * A promise that starts `start` only when it is awaited (then-ed), as Prisma's own promises do: a
 * call that is made but never awaited runs nothing and leaves no unhandled rejection.
 */
export function lazy<T>(start: () => Promise<T>): Promise<T> {
  let promise: Promise<T> | undefined;
  const get = () => {
    promise ??= start();
    return promise;
  };
  return {
    // biome-ignore lint/suspicious/noThenProperty: a lazy promise, as Prisma's are
    then: (onFulfilled, onRejected) => get().then(onFulfilled, onRejected),
    catch: (onRejected) => get().catch(onRejected),
    finally: (onFinally) => get().finally(onFinally),
    [Symbol.toStringTag]: "PrismaPromise",
  } as Promise<T>;
}

/** A refusal that rejects only when awaited. */
export function lazyReject(error: unknown): Promise<never> {
  return lazy(() => Promise.reject(error));
}
