import { AsyncLocalStorage } from "node:async_hooks";
import type { Attributes, Span } from "@opentelemetry/api";
import { isShardkitError, type ShardIdentifier } from "@shardkit/id";
import { type ScatterResult, scatter } from "@shardkit/scatter";
import {
  type ClaimContext,
  checkClaims,
  holdClaims,
  readClaim,
  releaseClaims,
  takeClaims,
} from "./claims.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, UnsupportedShardOperationError } from "./errors.js";
import { isPrismaValidationError } from "./internals.js";
import { delegateKey } from "./keys.js";
import { type OwnershipHook, withCurrentOwner } from "./ownership.js";
import type { Obj, Plan, PlanContext, PlanTarget } from "./plan.js";
import { NO_CONTEXT, type Planner, targetKey, WRITES } from "./planner.js";
import type { ScatterReport, ScatterTargetReport } from "./scatter/options.js";
import type { Call, Scope, ShardScopes, View } from "./scope.js";
import type { Lookup, Resolved } from "./strategies.js";
import { ATTR, endWithError, type Telemetry, tracedLazy } from "./telemetry.js";
import { runInShardTransaction } from "./transaction.js";
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

/**
 * Runs plans. It never decides where a call goes (the planner does); it runs a plan through the
 * injected `call` and owns the scope of one routed client: the shard transaction or action the
 * current async context is in. Two routed clients never share a scope.
 */
export class Executor implements ShardScopes {
  readonly scope = new AsyncLocalStorage<Scope>();
  private readonly nullable = new Map<string, boolean>();
  /** Per database, the replica the next read goes to (round robin). */
  private readonly turns: number[] = [];

  /** The span of the routed call the current async context runs in (telemetry on only). */
  readonly spans = new AsyncLocalStorage<Span>();
  /** The plan the last call made (read right after planning, when telemetry is on). */
  private planned: Plan | undefined;

  constructor(
    readonly planner: Planner,
    private readonly call: Call = callModel,
    /** OpenTelemetry (absent: `telemetry: false`). */
    readonly telemetry?: Telemetry | undefined,
    /** The name of database `index` (`registry.physical[index].name`), for telemetry. */
    private readonly databaseName: (index: number) => string | undefined = () => undefined,
    /**
     * How long one of the statements shardkit sends on a call's behalf (a scatter leg, a claim
     * statement, an ownership check) may wait for its database, a connection and then the answer,
     * before it fails with `DatabaseTimeoutError` naming the database.
     */
    readonly timeoutMs: number = DEFAULT_TIMEOUT_MS,
  ) {}

  /** `call` on database `database`'s client, bounded by `timeoutMs`: for the statements shardkit sends itself. */
  private boundedCall(
    view: View,
    database: number,
    model: string,
    operation: string,
    args: unknown,
  ): Promise<unknown> {
    return this.bounded(database, () => this.call(view.clients[database]!, model, operation, args));
  }

  /**
   * `run()`, a statement on database `database` (its client's or a transaction's there), or
   * `DatabaseTimeoutError` naming the database and its shards once `timeoutMs` pass first.
   */
  bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T> {
    return withDeadline(
      this.timeoutMs,
      () => {
        const shards = this.planner.placement.physical[database]?.shards ?? [];
        return new DatabaseTimeoutError(
          this.databaseName(database) ?? `#${database}`,
          shards,
          this.timeoutMs,
        );
      },
      run,
    );
  }

  /** Plans and runs `model.operation(args)` for a call through the routed client. */
  run(view: View, model: string, operation: string, args: Obj | undefined): PromiseLike<unknown> {
    const telemetry = this.telemetry;
    if (telemetry === undefined || !telemetry.on()) return this.route(view, model, operation, args);
    this.planned = undefined;
    return this.traced(telemetry, this.route(view, model, operation, args), model, operation);
  }

  /** Prisma's lazy promise, wrapped: the span starts when the call is awaited, ends when it settles. */
  private traced(
    telemetry: Telemetry,
    promise: PromiseLike<unknown>,
    model: string,
    operation: string,
  ): PromiseLike<unknown> {
    const plan = this.planned;
    this.planned = undefined;
    return tracedLazy(
      promise,
      () => {
        const attributes = this.attributesOf(plan, model, operation);
        if (telemetry.metering && plan) this.countCall(telemetry, plan);
        if (!telemetry.tracing()) return undefined;
        return telemetry.startSpan(`shardkit ${model}.${operation}`, attributes);
      },
      (span, run) => (span ? this.spans.run(span, run) : run()),
    );
  }

  /** The span attributes of a call with `plan` (undefined: planned later, after a lookup). */
  attributesOf(plan: Plan | undefined, model: string, operation: string): Attributes {
    const attributes: Attributes = {
      [ATTR.system]: "postgresql",
      [ATTR.operation]: operation,
      [ATTR.collection]: model,
    };
    if (plan) this.annotate(attributes, plan);
    return attributes;
  }

  private annotate(attributes: Attributes, plan: Plan): void {
    attributes[ATTR.plan] = plan.kind;
    if (plan.kind === "shard") {
      attributes[ATTR.shard] = plan.shard.key;
      const name = this.databaseName(plan.database);
      if (name !== undefined) attributes[ATTR.database] = name;
    } else if (plan.kind === "database") {
      attributes[ATTR.shards] = plan.target.shards.map((s) => s.key);
      const name = this.databaseName(plan.target.database);
      if (name !== undefined) attributes[ATTR.database] = name;
    }
  }

  /** Sets a plan made after a lookup on the current call's span. */
  private noteLookup(plan: Plan): void {
    const telemetry = this.telemetry;
    if (telemetry?.metering) this.countCall(telemetry, plan);
    const span = this.spans.getStore();
    if (!span) return;
    const attributes: Attributes = {};
    this.annotate(attributes, plan);
    span.setAttributes(attributes);
  }

  /** `shardkit.calls`: one per logical shard a routed call runs on. */
  private countCall(telemetry: Telemetry, plan: Plan): void {
    const counter = telemetry.counter("shardkit.calls", "Routed calls, by logical shard");
    if (plan.kind === "shard") counter.add(1, telemetry.shard(plan.shard.key));
    else if (plan.kind === "database")
      for (const s of plan.target.shards) counter.add(1, telemetry.shard(s.key));
    else if (plan.kind === "scatter") {
      for (const t of plan.targets) for (const s of t.shards) counter.add(1, telemetry.shard(s.key));
    }
  }

  private route(view: View, model: string, operation: string, args: Obj | undefined): PromiseLike<unknown> {
    const scope = this.scope.getStore();
    if (scope?.kind === "staging" && WRITES.has(operation)) {
      return lazyReject(
        new UnsupportedShardOperationError(
          `${model}.${operation} inside $action runs immediately and outside the action's transaction; stage it (unit.${operation}("${delegateKey(model)}", args)) instead`,
        ),
      );
    }
    if (operation === "upsert" && args && this.claimsIn(model, args)) {
      return lazy(() => this.upsertClaimed(view, model, args));
    }
    if (scope?.kind === "tx") return this.routeIn(scope.tx, scope.shard, model, operation, args, scope.view);
    const context: PlanContext = view.scatter ? { scatter: view.scatter } : NO_CONTEXT;
    const plan = this.planner.plan(model, operation, args, context);
    if (this.telemetry) this.planned = plan;
    if (plan.kind === "lookup") {
      return lazy(async () => {
        const [next, resolved] = await this.resolve(
          view,
          plan,
          (c) => this.planner.plan(model, operation, args, c),
          context,
        );
        if (this.telemetry) this.noteLookup(next);
        return this.runPlan(next, view, model, operation, args, { ...context, resolved });
      });
    }
    return this.runPlan(plan, view, model, operation, args, context);
  }

  /**
   * Runs a plan made outside any transaction. With a partition map attached, a call to one database
   * that a former owner refuses (its fence; or its record, asked after an answer that found
   * nothing) is planned again and run at the current owner.
   */
  private runPlan(
    plan: Plan,
    view: View,
    model: string,
    operation: string,
    args: Obj | undefined,
    context: PlanContext,
  ): PromiseLike<unknown> {
    const hook = this.planner.placement.ownership;
    const claims = plan.kind === "shard" && plan.claims;
    if (hook && !claims && (plan.kind === "shard" || plan.kind === "database")) {
      // A former owner refuses the call: refresh the map, plan again, run at the current owner.
      let next: Plan | undefined = plan;
      return lazy(() =>
        withCurrentOwner(
          hook,
          () => {
            const current = next ?? this.planner.plan(model, operation, args, context);
            next = undefined;
            return this.owned(
              hook,
              view,
              current,
              operation,
              () => this.planner.plan(model, operation, args, context),
              (planned) => this.execute(planned, view, model, operation, args),
            );
          },
          this.telemetry,
        ),
      );
    }
    return this.execute(plan, view, model, operation, args);
  }

  /**
   * Runs a call planned to one database with a partition map attached. Its shards are admitted
   * first (a shard whose records are in doubt is refused), and an answer that found nothing (null,
   * an empty list, a count of zero, Prisma's P2025) is confirmed with the database: a database that
   * no longer owns the shard refuses instead, so a former owner never answers "not found" for rows
   * that live at the owner. A call over several shards of one database is always confirmed (a
   * shard that moved away would be missing from a non-empty answer).
   */
  private async owned(
    hook: OwnershipHook,
    view: View,
    plan: Plan,
    operation: string,
    replan: () => Plan,
    run: (plan: Plan) => PromiseLike<unknown>,
  ): Promise<unknown> {
    if (plan.kind !== "shard" && plan.kind !== "database") return run(plan);
    const shards = plan.kind === "shard" ? [plan.shard] : plan.target.shards;
    const write = { write: WRITES.has(operation) };
    for (const shard of shards) {
      const pending = hook.admit?.(shard, write);
      if (pending) {
        // Held in the router (its shard was between owners) or checked again: planned anew, for
        // where the shard is now, and admitted there.
        await pending;
        return this.owned(hook, view, replan(), operation, replan, run);
      }
    }
    const database = plan.kind === "shard" ? plan.database : plan.target.database;
    const client = view.clients[database]!;
    const confirm = hook.confirm;
    let result: unknown;
    try {
      result = await run(plan);
    } catch (error) {
      if (confirm && isNotFound(error))
        await Promise.all(shards.map((s) => this.bounded(database, () => confirm(client, s))));
      throw error;
    }
    if (confirm && (shards.length > 1 || isEmptyAnswer(result, operation)))
      await Promise.all(shards.map((s) => this.bounded(database, () => confirm(client, s))));
    return result;
  }

  /**
   * Answers a `lookup` plan's lookups (a directory's, in its cache; a claim row's) and plans again
   * with them, until the plan needs no more (a key may need several). Returns the plan and the answers.
   */
  async resolve(
    view: View | undefined,
    plan: Plan,
    replan: (context: PlanContext) => Plan,
    context: PlanContext,
  ): Promise<[Plan, Resolved]> {
    const resolved = new Map<string, unknown>(context.resolved ?? []);
    let current = plan;
    for (let round = 0; current.kind === "lookup"; round++) {
      if (round === 4) {
        throw new UnsupportedShardOperationError("a call needed more than 4 rounds of directory lookups");
      }
      await Promise.all(
        current.lookups.map(async (lookup: Lookup) => {
          if (resolved.has(lookup.id)) return;
          if (lookup.claim) {
            if (!view) {
              throw new UnsupportedShardOperationError("a unique field's claim cannot be read here");
            }
            resolved.set(lookup.id, await readClaim(this.claimContext(view), lookup.claim));
          } else {
            resolved.set(lookup.id, await lookup.run());
          }
        }),
      );
      current = replan({ ...context, resolved });
    }
    return [current, resolved];
  }

  /** Runs `model.operation(args)` in the transaction `tx` on `shard`, after checking it names no other shard. */
  runIn(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
    view?: View,
  ): PromiseLike<unknown> {
    const telemetry = this.telemetry;
    if (telemetry === undefined || !telemetry.on())
      return this.routeIn(tx, shard, model, operation, args, view);
    this.planned = undefined;
    return this.traced(telemetry, this.routeIn(tx, shard, model, operation, args, view), model, operation);
  }

  private routeIn(
    tx: object,
    shard: ShardIdentifier,
    model: string,
    operation: string,
    args: unknown,
    view?: View,
  ): PromiseLike<unknown> {
    const context: PlanContext = { within: shard };
    const replan = (c: PlanContext) => this.planner.plan(model, operation, args as Obj | undefined, c);
    const plan = replan(context);
    if (this.telemetry) this.planned = plan;
    if (plan.kind === "lookup") {
      return lazy(async () => {
        const [next] = await this.resolve(view, plan, replan, context);
        if (this.telemetry) this.noteLookup(next);
        return this.runPlanIn(next, tx, view, model, operation, args);
      });
    }
    return this.runPlanIn(plan, tx, view, model, operation, args);
  }

  private runPlanIn(
    plan: Plan,
    tx: object,
    view: View | undefined,
    model: string,
    operation: string,
    args: unknown,
  ): PromiseLike<unknown> {
    if (plan.kind === "refuse") return lazyReject(plan.error);
    if (plan.kind !== "shard") return this.call(tx, model, operation, args);
    const run = plan.args ?? args;
    const claims = plan.claims;
    const confirm = this.planner.placement.ownership?.confirm;
    if (!claims && confirm) {
      // The transaction asserted ownership when it began; an answer that found nothing later in it
      // (under READ COMMITTED, after a switch and a cleanup) asserts it again.
      return lazy(async () => {
        let result: unknown;
        try {
          result = await this.call(tx, model, operation, run);
        } catch (error) {
          if (isNotFound(error)) await this.bounded(plan.database, () => confirm(tx, plan.shard));
          throw error;
        }
        if (isEmptyAnswer(result, operation))
          await this.bounded(plan.database, () => confirm(tx, plan.shard));
        return result;
      });
    }
    if (!claims) return this.call(tx, model, operation, run);
    if (!view) {
      return lazyReject(
        new UnsupportedShardOperationError(
          `${model}.${operation} sets a field unique across shards; run it through the routed client or a $transactionOn transaction`,
        ),
      );
    }
    // In the caller's transaction: claim first (committed on the claims' shards), then the check and
    // the row in this transaction. A rollback leaves the claims void, to be settled by the next claimant.
    const context = this.claimContext(view);
    return lazy(async () => {
      const taken = await this.atOwner(() => takeClaims(context, claims));
      await checkClaims(tx, taken);
      return this.call(tx, model, operation, run);
    });
  }

  /** The claim saga of a write outside any transaction: claim, then the row in its shard transaction, then hold. */
  private async claimed(
    view: View,
    plan: Extract<Plan, { kind: "shard" }>,
    model: string,
    operation: string,
    args: unknown,
  ): Promise<unknown> {
    const context = this.claimContext(view);
    const taken = await this.atOwner(() => takeClaims(context, plan.claims!));
    let result: unknown;
    try {
      // READ COMMITTED whatever the database's default: the token check after the value's lock must
      // see a void mark committed while it waited (under REPEATABLE READ it would fail with 40001).
      result = await runInShardTransaction(this, view, plan.shard, ROW_STEP, async () => {
        const scope = this.scope.getStore() as Extract<Scope, { kind: "tx" }>;
        await checkClaims(scope.tx, taken);
        return this.call(scope.tx, model, operation, args);
      });
    } catch (error) {
      // Settled, not deleted: if the row did commit (an error after the commit), its claims stay.
      await this.atOwner(() => releaseClaims(context, taken)).catch(() => {});
      throw error;
    }
    // A failure here leaves the claims pending with their row: `repairClaims` (or the next claimant) holds them.
    await this.atOwner(() => holdClaims(context, taken)).catch(() => {});
    return result;
  }

  /** Whether an upsert of `model` names a field unique across shards (in where, create or update). */
  private claimsIn(model: string, args: Obj): boolean {
    const unique = this.planner.keys.uniqueOf(model);
    if (unique.length === 0) return false;
    return [args.where, args.create, args.update].some(
      (part) =>
        !!part && typeof part === "object" && unique.some((u) => (part as Obj)[u.field] !== undefined),
    );
  }

  /**
   * An upsert that names a field unique across shards, as the update and the create it stands for,
   * each routed and claimed as on its own: the update of the row `where` finds (through its claim
   * when `where` names the field), else the create. A create that loses its value to a row written
   * meanwhile (the other half of two concurrent upserts) is an update of that row after all; a value
   * still lost after three rounds throws `UniqueViolationError`. Not one statement: the row is found,
   * then written, as two calls (a claim has to be taken before its row).
   */
  private async upsertClaimed(view: View, model: string, args: Obj): Promise<unknown> {
    const { where, create, update, ...shape } = args;
    // In a transaction, a failed statement (Prisma's P2002) has aborted it: only a claim lost before
    // the row was written (UniqueViolationError, no statement failed) may be followed by another round.
    const inTransaction = this.scope.getStore()?.kind === "tx";
    for (let round = 1; ; round++) {
      try {
        return await this.route(view, model, "update", { ...shape, where, data: update ?? {} });
      } catch (error) {
        // The update's own values are claimed before its row is looked for: a value held elsewhere
        // refuses the update, which only counts if there is a row to update.
        const absent =
          isNotFound(error) ||
          (isShardkitError(error, "UNIQUE_VIOLATION") &&
            (await this.route(view, model, "findUnique", { where })) === null);
        if (!absent) throw error;
      }
      try {
        return await this.route(view, model, "create", { ...shape, data: create ?? {} });
      } catch (error) {
        const lost =
          isShardkitError(error, "UNIQUE_VIOLATION") ||
          (!inTransaction && (error as { code?: unknown })?.code === "P2002");
        if (!lost || round === UPSERT_ROUNDS) throw error;
        // Another write took the value meanwhile: its row is updated next round. Two upserts of
        // one new value that keep taking it from each other step apart, at random.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * round));
      }
    }
  }

  /**
   * Runs a step of the claim saga on the claims' shards; a former owner's refusal (a claim's shard
   * moved) refreshes the map and runs it again at the current owner. Each step may run again: a
   * claim already this row's is left as it is.
   */
  private atOwner<R>(step: () => Promise<R>): Promise<R> {
    return withCurrentOwner(this.planner.placement.ownership, step, this.telemetry);
  }

  /** How the claim functions reach the databases of `view`. */
  claimContext(view: View): ClaimContext {
    return {
      clients: view.clients,
      placement: this.planner.placement,
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

  /** Runs a plan made outside any transaction. */
  execute(plan: Plan, view: View, model: string, operation: string, args: unknown): PromiseLike<unknown> {
    switch (plan.kind) {
      case "shard":
        if (plan.claims) return lazy(() => this.claimed(view, plan, model, operation, plan.args ?? args));
        return this.on(view, plan.database, model, operation, plan.args ?? args);
      case "lookup":
        return lazyReject(
          new UnsupportedShardOperationError(
            `${model}.${operation}: a lookup plan is resolved before it is executed`,
          ),
        );
      case "database":
        return this.on(view, plan.target.database, model, operation, plan.target.args);
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
      let database = plan.targets[0]!.database;
      if (step.row) {
        const { placement } = this.planner;
        database = placement.physicalOf(placement.resolve(step.row.shard)).index;
        const lookup = step.row.lookup;
        row = (await this.bounded(database, () =>
          this.on(view, database, model, "findUnique", lookup),
        )) as Obj | null;
      }
      const nullable = new Set<string>();
      if (row || !step.row) {
        for (const field of step.fields) {
          if (row?.[field] === null || (await this.isNullable(view, database, model, field)))
            nullable.add(field);
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
    const parent = this.telemetry ? this.spans.getStore() : undefined;
    const result = await scatter(
      plan.targets,
      async (target) => {
        const child = parent && this.scatterChild(parent, model, current.operation, target);
        try {
          const value = await this.bounded(target.database, () =>
            this.on(view, target.database, model, current.operation, current.argsFor(target)),
          );
          child?.end();
          return value;
        } catch (error) {
          if (!refused && !isShardUnavailable(error)) refused = { error };
          if (child) endWithError(child, error);
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
    if (this.telemetry) this.noteScatter(parent, result);
    const merged = current.merge(result.values);
    if (options.onReport) options.onReport(report(model, operation, result));
    const answered = result.outcomes.filter((o) => o.status === "fulfilled").map((o) => o.target);
    return this.finish(view, model, current, merged, answered.length > 0 ? answered : plan.targets);
  }

  /** A scatter's child span for one database. */
  private scatterChild(parent: Span, model: string, operation: string, target: PlanTarget): Span {
    const attributes: Attributes = {
      [ATTR.system]: "postgresql",
      [ATTR.operation]: operation,
      [ATTR.collection]: model,
      [ATTR.shards]: target.shards.map((s) => s.key),
    };
    const name = this.databaseName(target.database);
    if (name !== undefined) attributes[ATTR.database] = name;
    return this.telemetry!.startSpan(
      `shardkit ${model}.${operation} ${name ?? target.database}`,
      attributes,
      parent,
    );
  }

  /** Completeness on the scatter's span, an event per missing database, and `shardkit.scatter.misses`. */
  private noteScatter(parent: Span | undefined, result: ScatterResult<PlanTarget, unknown>): void {
    const telemetry = this.telemetry!;
    const missing = result.outcomes.filter((o) => o.status === "missing");
    parent?.setAttributes({
      [ATTR.complete]: result.complete,
      [ATTR.missing]: missing.flatMap((o) => o.target.shards.map((s) => s.key)),
    });
    for (const o of missing) {
      const name = this.databaseName(o.target.database) ?? String(o.target.database);
      const reason = String(o.reason);
      parent?.addEvent("shardkit.scatter.missing", {
        [ATTR.database]: name,
        [ATTR.shards]: o.target.shards.map((s) => s.key),
        "shardkit.reason": reason,
      });
      if (telemetry.metering) {
        telemetry
          .counter("shardkit.scatter.misses", "Databases missing from a scatter's answer")
          .add(1, { [ATTR.database]: name, "shardkit.reason": reason });
      }
    }
  }

  /**
   * Runs a call on database `database`: on its client, or, for a read outside any shard transaction
   * or action when the view has replicas for it, on its next replica in turn (round robin). A
   * replica that fails as unavailable (`isShardUnavailable`: down, unreachable, not ready) gets
   * the call asked once more of the database itself. The only place that picks a client for a call.
   */
  private on(
    view: View,
    database: number,
    model: string,
    operation: string,
    args: unknown,
  ): PromiseLike<unknown> {
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

  /** A `findFirstOrThrow` that found nothing raises Prisma's own not-found error, from a database that answered. */
  private finish(
    view: View,
    model: string,
    read: { orThrow?: boolean },
    merged: unknown,
    answered: readonly PlanTarget[],
  ): unknown {
    if (merged !== null || !read.orThrow) return merged;
    return this.boundedCall(view, answered[0]!.database, model, "findFirstOrThrow", {
      where: { id: { in: [] } },
    });
  }

  /**
   * Whether a scalar field may hold null. Prisma's runtime data model does not say, and Prisma
   * refuses `{ field: null }` for a required field, so ask once per field (a query that matches
   * nothing; a required field fails Prisma's validation before reaching the database).
   */
  private async isNullable(view: View, database: number, model: string, field: string): Promise<boolean> {
    const key = `${model}.${field}`;
    let known = this.nullable.get(key);
    if (known === undefined) {
      try {
        await this.boundedCall(view, database, model, "findFirst", {
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

/** Prisma's "not found" (P2025): an update, delete or `...OrThrow` read that matched no row. */
/** How many times a claimed upsert tries its update and then its create. */
const UPSERT_ROUNDS = 4;
/**
 * The options of the claim saga's row transaction: READ COMMITTED (see its use), and a longer wait
 * for a connection than Prisma's 2 s, as the claimants of one value queue on that database's pool.
 */
const ROW_STEP = { isolationLevel: "ReadCommitted", maxWait: 20_000 } as const;

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "P2025";
}

/**
 * An answer of `operation` that found nothing: null, an empty list, a batch's `{ count: 0 }`; for
 * `count` and `aggregate`, figures that are all zero or null (`0`, `{ _all: 0 }`, `{ _count: 0,
 * _sum: { x: null } }`).
 */
export function isEmptyAnswer(result: unknown, operation: string): boolean {
  if (result === null || result === undefined) return true;
  if (Array.isArray(result)) return result.length === 0;
  if (operation === "count" || operation === "aggregate") return nothingCounted(result);
  if (typeof result !== "object") return false;
  const { count } = result as { count?: unknown };
  return count === 0 && Object.keys(result).length === 1;
}

/** Whether every figure of an aggregate is zero or null (nested objects included). */
function nothingCounted(value: unknown): boolean {
  if (value === null || value === undefined || value === 0) return true;
  if (typeof value === "bigint") return value === 0n;
  if (typeof value !== "object") return false;
  if (Array.isArray(value) || value instanceof Date) return false;
  return Object.values(value).every(nothingCounted);
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
