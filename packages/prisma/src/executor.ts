// The executor: the one path every routed call takes (resolve, plan, run; in a shard transaction, at
// the current owner, timed for load per shard). Over 400 lines: that path reads top to bottom here.

import { AsyncLocalStorage } from "node:async_hooks";
import type { Span } from "@opentelemetry/api";
import type { ShardIdentifier } from "@shardkit/id";
import type { AtomicWatch } from "./atomic-auto.js";
import { CallTelemetry } from "./call-telemetry.js";
import { claimed, claimedIn, claimsIn, type SagaRunner, upsertClaimed } from "./claims/claim-saga.js";
import { type ClaimContext, readClaim } from "./claims/claims.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, UnsupportedShardOperationError } from "./errors.js";
import { delegateKey } from "./keys/keys.js";
import { lazy, lazyReject } from "./lazy.js";
import type { LoadRecorder } from "./load/recorder.js";
import { WRITES } from "./operations.js";
import { isEmptyAnswer, isNotFound, runOwned } from "./owned.js";
import { withCurrentOwner } from "./ownership.js";
import { type Placed, place } from "./place.js";
import type { Obj, Plan, PlanContext } from "./plan.js";
import { NO_CONTEXT, type Planner } from "./planner.js";
import type { ScatterReadOptions } from "./scatter/options.js";
import type { ScatterPageArgs } from "./scatter/page.js";
import { runScatter, type ScatterRunner } from "./scatter-run.js";
import type { Call, Scope, View } from "./scope.js";
import type { Lookup, Resolved } from "./shard-key.js";
import type { Telemetry } from "./telemetry.js";
import { isShardUnavailable } from "./unavailable.js";

/** How long one statement may wait for its database by default (`shardRouting`'s `timeoutMs`). */
export const DEFAULT_TIMEOUT_MS = 30_000;

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

/** A shard transaction a call runs in: its own client and its shard. */
interface InTransaction {
  tx: object;
  shard: ShardIdentifier;
}

/** One routed call, as its runner sees it. */
interface CallOf {
  view: View | undefined;
  tx: InTransaction | undefined;
  model: string;
  operation: string;
  args: Obj | undefined;
}

/** A plan, or (when the call's keys wait on lookups) how to fetch them and then plan. */
type Planned = Plan | (() => Promise<Plan>);

/**
 * Runs routed calls, each along one path: resolve (fetch in one batch every lookup its keys wait
 * on), plan (the planner decides where; it runs nothing), run (the plan's runner, with retries at
 * the current owner, deadlines, replicas and tracing around one call function). A call in a shard
 * transaction takes the same path, run in the transaction. It owns the scope of one routed client:
 * the shard transaction or action the current async context is in. Two routed clients never share
 * a scope.
 */
export class Executor implements ScatterRunner, SagaRunner {
  readonly scope = new AsyncLocalStorage<Scope>();
  readonly nullable = new Map<string, boolean>();
  /** Per database, the replica the next read goes to (round robin). */
  private readonly turns: number[] = [];

  /** The span of the routed call the current async context runs in (telemetry on only). */
  readonly spans = new AsyncLocalStorage<Span>();
  private readonly tracing: CallTelemetry | undefined;
  /** Load per logical shard (absent: `load: false` and no metrics), set by `shardRouting`. */
  load: LoadRecorder | undefined;
  /** The router's own recovery of atomic actions (absent: `atomicRecovery: false`), set by `shardRouting`. */
  atomic: AtomicWatch | undefined;

  constructor(
    readonly planner: Planner,
    readonly call: Call = callModel,
    /** OpenTelemetry (absent: `telemetry: false`). */
    readonly telemetry?: Telemetry | undefined,
    /** The name of database `index` (`registry.databases[index].name`), for telemetry. */
    readonly databaseName: (index: number) => string | undefined = () => undefined,
    /**
     * How long one of the statements shardkit sends on a call's behalf (a scatter leg, a claim
     * statement, an ownership check) may wait for its database, a connection and then the answer,
     * before it fails with `DatabaseTimeoutError` naming the database.
     */
    readonly timeoutMs: number = DEFAULT_TIMEOUT_MS,
  ) {
    this.tracing =
      telemetry &&
      new CallTelemetry(telemetry, this.spans, databaseName, (plan) => this.place(plan, undefined));
  }

  /**
   * `run()`, a statement on database `database` (its client's or a transaction's there), or
   * `DatabaseTimeoutError` naming the database and its shards once `timeoutMs` pass first.
   */
  bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T> {
    return withDeadline(
      this.timeoutMs,
      () => {
        const shards = this.planner.layout.databases[database]?.shards ?? [];
        return new DatabaseTimeoutError(
          this.databaseName(database) ?? `#${database}`,
          shards,
          this.timeoutMs,
        );
      },
      run,
    );
  }

  /** `model.operation(args)` through the routed client: in the shard transaction the context is in, if any. */
  run(view: View, model: string, operation: string, args: Obj | undefined): PromiseLike<unknown> {
    return this.enter(view, undefined, model, operation, args, true);
  }

  /** `model.operation(args)` through the client of the transaction `tx` on `shard`. */
  runIn(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
    view?: View,
  ): PromiseLike<unknown> {
    return this.enter(view, { tx, shard }, model, operation, args as Obj | undefined, true);
  }

  /** A routed call, untraced (a part of the call being traced: a claimed upsert's update or create). */
  route(view: View, model: string, operation: string, args: Obj): PromiseLike<unknown> {
    return this.enter(view, undefined, model, operation, args, false);
  }

  /** The one path of a routed call: resolve, plan, run. */
  private enter(
    view: View | undefined,
    tx: InTransaction | undefined,
    model: string,
    operation: string,
    args: Obj | undefined,
    trace: boolean,
  ): PromiseLike<unknown> {
    if (!tx) {
      const scope = this.scope.getStore();
      if (scope?.kind === "staging" && WRITES.has(operation)) {
        const refused = lazyReject(
          new UnsupportedShardOperationError(
            `${model}.${operation} inside $action runs immediately and outside the action's transaction; stage it (unit.${operation}("${delegateKey(model)}", args)) instead`,
          ),
        );
        return this.traced(trace, refused, undefined, model, operation);
      }
      if (operation === "upsert" && view && args && claimsIn(this, model, args)) {
        const routed = view;
        const upsert = lazy(() => upsertClaimed(this, routed, model, args));
        return this.traced(trace, upsert, undefined, model, operation);
      }
      // The routed client inside a shard transaction: the call joins it.
      if (scope?.kind === "tx") {
        tx = scope;
        view = scope.view;
      }
    }
    const context: PlanContext = tx
      ? { within: tx.shard }
      : view?.scatter
        ? { scatter: view.scatter }
        : NO_CONTEXT;
    if (!this.planner.keys.mayLookUp) {
      // No key of this client can wait on a lookup (the usual case): planned at once.
      const plan = this.planner.plan(model, operation, args, context);
      const run = this.runPlan(plan, { view, tx, model, operation, args });
      return this.traced(trace, run, plan, model, operation);
    }
    const planned = this.resolve(
      view,
      context,
      (c) => this.planner.lookups(model, operation, args, c),
      (c) => this.planner.plan(model, operation, args, c),
    );
    const call: CallOf = { view, tx, model, operation, args };
    if (typeof planned !== "function") {
      return this.traced(trace, this.runPlan(planned, call), planned, model, operation);
    }
    const later = planned;
    const run = lazy(async () => {
      const plan = await later();
      this.tracing?.noteLookup(plan);
      return this.runPlan(plan, call);
    });
    return this.traced(trace, run, undefined, model, operation);
  }

  /**
   * A call's resolve step: the lookups its keys wait on (none for most calls: then it is planned at
   * once), fetched in one batch into the call's answers, then planned once with them.
   */
  private resolve(
    view: View | undefined,
    context: PlanContext,
    lookupsOf: (context: PlanContext) => Lookup[],
    plan: (context: PlanContext) => Plan,
  ): Planned {
    if (!this.planner.keys.mayLookUp) return plan(context);
    const resolved: Resolved = new Map();
    const withAnswers: PlanContext = { ...context, resolved };
    const lookups = lookupsOf(withAnswers);
    if (lookups.length === 0) return plan(withAnswers);
    return async () => {
      await this.fetch(view, lookups, resolved);
      return plan(withAnswers);
    };
  }

  /** Fetches `lookups` (directory answers, claim rows) in parallel into `resolved`. */
  private async fetch(view: View | undefined, lookups: readonly Lookup[], resolved: Resolved): Promise<void> {
    await Promise.all(
      lookups.map(async (lookup) => {
        if (lookup.claim) {
          if (!view) throw new UnsupportedShardOperationError("a unique field's claim cannot be read here");
          resolved.set(lookup.id, await readClaim(this.claimContext(view), lookup.claim));
        } else {
          resolved.set(lookup.id, await lookup.run());
        }
      }),
    );
  }

  /** A keyset page (`db.$scatterPage`): resolved, planned and run as any call. */
  page(view: View, model: string, args: ScatterPageArgs, options: ScatterReadOptions): Promise<unknown> {
    const plan = this.resolve(
      view,
      NO_CONTEXT,
      (c) => this.planner.pageLookups(model, args, c.resolved),
      (c) => this.planner.page(model, args, options, c.resolved),
    );
    if (typeof plan !== "function") return Promise.resolve(this.execute(plan, view, model, "findMany", args));
    return plan().then((p) => this.execute(p, view, model, "findMany", args));
  }

  /** Runs a call's plan: in its transaction, or at the shard's current owner. */
  private runPlan(plan: Plan, call: CallOf): PromiseLike<unknown> {
    const { view, tx, model, operation, args } = call;
    if (tx) return this.inTransaction(plan, tx, view, model, operation, args);
    const hook = this.planner.layout.ownership;
    if (!hook || plan.kind === "refuse" || (plan.kind === "shard" ? plan.claims : plan.read)) {
      return this.execute(plan, view!, model, operation, args);
    }
    // A former owner refuses the call: refresh the map and run the same plan again; placed anew,
    // its shards land at their current owner.
    const routed = view!;
    return lazy(() =>
      withCurrentOwner(
        hook,
        () =>
          runOwned(
            hook,
            this,
            routed.clients,
            () => this.place(plan, args),
            operation,
            (placed) => this.runPlaced(plan, placed, routed, model, operation),
          ),
        this.telemetry,
      ),
    );
  }

  /** Where a plan's shards are now, and so how it runs (see `place`). */
  place(plan: Exclude<Plan, { kind: "refuse" }>, args: unknown): Placed {
    return place(plan, this.planner.layout, args);
  }

  /** Runs a plan in the shard transaction `tx` (the planner has checked it names no other shard). */
  private inTransaction(
    plan: Plan,
    { tx, shard }: InTransaction,
    view: View | undefined,
    model: string,
    operation: string,
    args: unknown,
  ): PromiseLike<unknown> {
    if (plan.kind === "refuse") return lazyReject(plan.error);
    if (plan.kind !== "shard") return this.callIn(tx, shard, model, operation, args);
    const run = plan.args ?? args;
    if (plan.claims) {
      if (!view) {
        return lazyReject(
          new UnsupportedShardOperationError(
            `${model}.${operation} sets a field unique across shards; run it through the routed client or a $transactionOn transaction`,
          ),
        );
      }
      return lazy(() => claimedIn(this, view, tx, plan, model, operation, run));
    }
    const confirm = this.planner.layout.ownership?.confirm;
    if (!confirm) return this.callIn(tx, shard, model, operation, run);
    // The transaction asserted ownership when it began; an answer that found nothing later in it
    // (under READ COMMITTED, after a switch and a cleanup) asserts it again.
    return lazy(async () => {
      let result: unknown;
      try {
        result = await this.callIn(tx, shard, model, operation, run);
      } catch (error) {
        if (isNotFound(error)) await this.confirmIn(tx, shard, confirm);
        throw error;
      }
      if (isEmptyAnswer(result, operation)) await this.confirmIn(tx, shard, confirm);
      return result;
    });
  }

  /** `model.operation(args)` in the transaction `tx` on `shard`: counted there when load is on. */
  private callIn(tx: object, shard: ShardIdentifier, model: string, operation: string, args: unknown) {
    const called = this.call(tx, model, operation, args);
    return this.load ? this.load.measure(called, this.load.one(shard), model, operation, args) : called;
  }

  /** Asks the transaction's database whether it still owns `shard` (it refuses if not). */
  private confirmIn(
    tx: object,
    shard: ShardIdentifier,
    confirm: (client: object, shard: ShardIdentifier) => Promise<void>,
  ): Promise<void> {
    return this.bounded(this.planner.layout.databaseOf(shard).index, () => confirm(tx, shard));
  }

  /** How the claim functions reach the databases of `view`. */
  claimContext(view: View): ClaimContext {
    return {
      clients: view.clients,
      layout: this.planner.layout,
      call: this.call,
      timeoutMs: this.timeoutMs,
      bounded: (database, run) => this.bounded(database, run),
      spec: (scope) => this.planner.keys.uniqueSpec(scope),
    };
  }

  /** Runs `model.operation(args)` on `client` as it is, already planned (an action's staged statement). */
  callOn(client: object, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    return this.call(client, model, operation, args);
  }

  /** Runs a plan made outside any transaction, placed where its shards are now. */
  execute(plan: Plan, view: View, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    if (plan.kind === "refuse") return lazyReject(plan.error);
    if (plan.kind === "shard" && plan.claims) {
      return lazy(() => claimed(this, view, plan, model, operation, plan.args ?? args));
    }
    return this.runPlaced(plan, this.place(plan, args), view, model, operation);
  }

  /** Runs a placed plan: on its one database, merged over several (a read), or refused (a write: `$action` only). */
  private runPlaced(
    plan: Exclude<Plan, { kind: "refuse" }>,
    { shape, targets }: Placed,
    view: View,
    model: string,
    operation: string,
  ): PromiseLike<unknown> {
    switch (shape) {
      case "shard":
      case "database": {
        const { database, shards, args } = targets[0]!;
        const called = this.on(view, database, model, operation, args);
        return this.load
          ? this.load.measure(called, shards, model, operation, shape === "shard" ? args : undefined)
          : called;
      }
      case "split":
        return lazyReject(
          new UnsupportedShardOperationError(
            `${model}.${operation}: writes over several databases run only in $action`,
          ),
        );
      case "scatter":
        return lazy(() => {
          // Only a plan over several shards is merged.
          const { spread, read, options } = plan as Extract<Plan, { kind: "shards" }>;
          // A read planned on one database whose shards are on several now (one moved) is merged as any.
          const merge = read ?? this.planner.read(model, operation, spread.argsFor(spread.shards));
          return runScatter(this, view, model, operation, targets, merge, options);
        });
    }
  }

  /**
   * Runs a call on database `database`: on its client, or, for a read outside any shard transaction
   * or action when the view has replicas for it, on its next replica in turn (round robin). A
   * replica that fails as unavailable (`isShardUnavailable`: down, unreachable, not ready) gets
   * the call asked once more of the database itself. The only place that picks a client for a call.
   */
  on(view: View, database: number, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    const replicas = view.replicas?.[database];
    if (replicas === undefined || replicas.length === 0 || WRITES.has(operation) || this.scope.getStore()) {
      return this.call(view.clients[database]!, model, operation, args);
    }
    const turn = this.turns[database] ?? 0;
    this.turns[database] = (turn + 1) % replicas.length;
    const replica = replicas[turn]!;
    return lazy(() =>
      Promise.resolve(this.call(replica, model, operation, args)).catch((error: unknown) => {
        if (!isShardUnavailable(error)) throw error;
        return this.call(view.clients[database]!, model, operation, args);
      }),
    );
  }

  /** Prisma's lazy promise, traced (see `CallTelemetry.traced`) when `trace` and telemetry is on. */
  private traced(
    trace: boolean,
    promise: PromiseLike<unknown>,
    plan: Plan | undefined,
    model: string,
    operation: string,
  ): PromiseLike<unknown> {
    if (!trace || this.tracing === undefined || !this.tracing.telemetry.on()) return promise;
    return this.tracing.traced(promise, plan, model, operation);
  }
}
