import type { ShardIdentifier } from "@shardkit/id";
import { type ActionFailure, type AtomicPoint, runAtomic, sortShards } from "./atomic.js";
import {
  CrossShardError,
  MissingModelError,
  NotCommittedError,
  PartialCommitError,
  ShardKeyRequiredError,
  UnsupportedShardOperationError,
} from "./errors.js";
import type { Executor } from "./executor.js";
import { type OutboxEventInput, outboxRecord } from "./outbox.js";
import { countRejection, givenUp, type OwnershipHook } from "./ownership.js";
import type { Obj } from "./plan.js";
import { type ShardClient, type ShardRef, toShard } from "./registry.js";
import type { View } from "./scope.js";
import { ATTR, endWithError } from "./telemetry.js";
import {
  inDatabaseTransaction,
  inShard,
  type TransactionClient,
  type TransactionOptions,
} from "./transaction.js";

/** The model delegates of a client: `wallet`, `orderItem`, ... */
export type ModelKey<Client> = {
  [K in keyof Client]: K extends `$${string}` ? never : Client[K] extends { findMany: unknown } ? K : never;
}[keyof Client] &
  string;

type WriteOperation = "create" | "createMany" | "update" | "updateMany" | "upsert" | "delete" | "deleteMany";
type ArgsOf<Client, M extends ModelKey<Client>, Op extends WriteOperation> =
  Client[M] extends Record<Op, (args: infer A) => unknown> ? A : never;
type ResultOf<Client, M extends ModelKey<Client>, Op extends WriteOperation> =
  Client[M] extends Record<Op, (...args: never[]) => infer R> ? Awaited<R> : unknown;
/** What a staged write gives once committed: the row, or the count of a `...Many`. */
type StagedResult<Client, M extends ModelKey<Client>, Op extends WriteOperation> = Op extends `${string}Many`
  ? { count: number }
  : ResultOf<Client, M, Op>;
/** An `ActionUnit` method staging one write operation, typed as the model delegate's own: `unit.create("wallet", { data })`. */
type StageMethod<Client, Op extends WriteOperation> = <M extends ModelKey<Client>>(
  model: M,
  args: ArgsOf<Client, M, Op>,
) => StagedWrite<StagedResult<Client, M, Op>>;

export type StagedStatus = "staged" | "committed" | "rolled-back" | "not-attempted";

/** One statement (or step) of a staged write, on one database. */
interface Step {
  database: number;
  /** The logical shards it writes to. */
  shards: readonly ShardIdentifier[];
  run(tx: object): PromiseLike<unknown>;
  status: StagedStatus;
  value?: unknown;
}

/**
 * A write staged in an action. Its result is readable once its shard's transaction committed. A
 * write whose `in` list or rows span databases is one statement per database; its result adds up
 * the counts.
 */
export class StagedWrite<T = unknown> {
  /** @internal Its statements, one per database, where its shards were when it was last placed. */
  steps: readonly Step[];

  /** @internal */
  constructor(
    /** The shards it writes to (one, unless an `in` list or createMany rows span shards). */
    readonly shards: readonly ShardIdentifier[],
    readonly description: string,
    /** @internal Its statements where its shards are now (placed again after a former owner refused them). */
    readonly place: () => Step[],
    steps: readonly Step[] = place(),
  ) {
    this.steps = steps;
  }

  get status(): StagedStatus {
    return this.steps.find((step) => step.status !== "committed")?.status ?? "committed";
  }

  /** The operation's result. Throws `NotCommittedError` unless every shard it writes to committed. */
  get result(): T {
    const status = this.status;
    if (status !== "committed") throw new NotCommittedError(this.description, this.shards, status);
    if (this.steps.length === 1) return this.steps[0]!.value as T;
    return { count: this.steps.reduce((sum, step) => sum + (step.value as { count: number }).count, 0) } as T;
  }
}

export interface ActionOptions extends Omit<TransactionOptions, "retries"> {
  /**
   * Opt in to atomic commit across shards (two-phase commit): the writes of every database are
   * prepared (`PREPARE TRANSACTION`), the decision is recorded on the first database in its own
   * prepared transaction, then all commit; anything that fails before the decision rolls back
   * everywhere. Implies `allowCrossShard`. Every database's server needs `max_prepared_transactions
   * > 0` and the first database the `AtomicDecision` table (`schema/atomic.prisma`); otherwise
   * `AtomicUnavailableError` before anything is written. Readers may still see one database's
   * writes before another's (no snapshot across shards), and rows stay locked from prepare to
   * commit: a coordinator that dies leaves them to recovery (`$recoverAtomic`, any router).
   * Default `false`: shardkit never calls cross-shard work atomic unless asked.
   */
  atomic?: boolean;
  /** @internal Called at each point of an atomic action's protocol (tests stop a coordinator there). */
  atomicProbe?: ((point: AtomicPoint, database: number) => Promise<void> | void) | undefined;
  /**
   * Let the action write to several shards: one transaction per database (the shards it holds
   * commit together), in database order, no retry (but for a partition map's refusal before anything
   * committed: see `commit`), and a `PartialCommitError` that says exactly
   * which shards committed if one fails. It is never atomic across databases. Default `false`:
   * staging for two shards throws `CrossShardError` before anything is written.
   */
  allowCrossShard?: boolean;
}

/**
 * A unit of work: writes are staged (nothing runs while the action's function runs), then grouped
 * by database and run in one transaction per database. Reads through the routed client run at once.
 */
export class ActionUnit<Client extends ShardClient> {
  private readonly staged: StagedWrite[] = [];

  /** @internal */
  constructor(private readonly executor: Executor) {}

  // The writes: each stages the model delegate's method of its name, with the same arguments.
  readonly create = this.stager("create");
  readonly createMany = this.stager("createMany");
  readonly update = this.stager("update");
  readonly updateMany = this.stager("updateMany");
  readonly upsert = this.stager("upsert");
  readonly delete = this.stager("delete");
  readonly deleteMany = this.stager("deleteMany");

  /**
   * Stages arbitrary work on one shard: `fn` runs inside that shard's transaction, after the
   * writes staged before it (a balance check that throws rolls the shard back).
   */
  on<T>(shardOrId: ShardRef, fn: (tx: TransactionClient<Client>) => Promise<T>): StagedWrite<T> {
    const { layout } = this.executor.planner;
    const shard = layout.resolve(toShard(shardOrId));
    const place = (): Step[] => [
      {
        database: layout.databaseOf(shard).index,
        shards: [shard],
        run: (tx) => inShard(this.executor, tx, shard, (guarded) => fn(guarded as TransactionClient<Client>)),
        status: "staged",
      },
    ];
    return this.push(new StagedWrite<T>([shard], `step on ${shard.key}`, place));
  }

  /**
   * Stages an outbox event on a shard: written in that shard's transaction, so it commits exactly
   * when the state does. Needs the models of `schema/shardkit.prisma` in the schema.
   */
  emit(shardOrId: ShardRef, event: OutboxEventInput): StagedWrite<{ id: string }> {
    if (!this.executor.planner.delegates.has("outboxEvent")) throw new MissingModelError("OutboxEvent");
    const shard = this.executor.planner.layout.resolve(toShard(shardOrId));
    return this.stage("outboxEvent", "create", { data: outboxRecord(shard, event) });
  }

  /** The shards the staged writes touch, ordered by bits. */
  get shards(): ShardIdentifier[] {
    return sortShards(this.staged.flatMap((w) => w.shards));
  }

  private stager<Op extends WriteOperation>(operation: Op): StageMethod<Client, Op> {
    return (model, args) => this.stage(model, operation, args);
  }

  private stage<T>(delegate: string, operation: WriteOperation, args: unknown): StagedWrite<T> {
    const { planner } = this.executor;
    const model = planner.delegates.get(delegate);
    if (model === undefined) {
      throw new UnsupportedShardOperationError(`${delegate} is not a model delegate of this Prisma schema`);
    }
    const a = (args ?? {}) as Obj;
    // A staged write names its shard, also in single-database mode (where a keyless call would run).
    // One map of answers for the three readings: a directory answer cached now is the one planned with.
    const resolved = new Map<string, unknown>();
    if (planner.lookups(model, operation, a, { allowCrossShard: true, resolved }).length > 0) {
      throw new UnsupportedShardOperationError(
        `${model}.${operation} is routed by a directory or a claim that is not cached: stage it with a key that names its shard, or run it outside $action`,
      );
    }
    const named = planner.keys.named(model, operation, a, { resolved });
    if (named.kind === "none") throw new ShardKeyRequiredError(model, operation, named.hint);
    const plan = planner.plan(model, operation, a, { allowCrossShard: true, resolved });
    switch (plan.kind) {
      case "refuse":
        throw plan.error;
      case "shard":
        if (plan.claims) {
          throw new UnsupportedShardOperationError(
            `${model}.${operation} sets a field unique across shards (${plan.claims.map((c) => c.scope).join(", ")}): its claim is a saga of its own; run it outside $action`,
          );
        }
        break;
      case "shards":
        if (!plan.write) throw new UnsupportedShardOperationError(`${model}.${operation} is not a write`);
    }
    const place = () =>
      this.executor.place(plan, a).targets.map(
        (target): Step => ({
          database: target.database,
          shards: target.shards,
          run: (tx) => this.executor.callOn(tx, model, operation, target.args),
          status: "staged",
        }),
      );
    const steps = place();
    const shards = sortShards(steps.flatMap((s) => s.shards));
    return this.push(new StagedWrite<T>(shards, `${model}.${operation}`, place, steps));
  }

  private push<W extends StagedWrite<any>>(write: W): W {
    this.staged.push(write);
    return write;
  }

  /** @internal The keys of the shards whose writes committed. */
  committedShards(): string[] {
    return sortShards(
      this.staged.flatMap((w) => w.steps.filter((s) => s.status === "committed").flatMap((s) => s.shards)),
    ).map((s) => s.key);
  }

  /**
   * @internal Groups the staged writes by database and runs them, one transaction per database.
   * With a partition map attached, each shard is admitted first (a write to a shard between owners
   * waits in the router), each transaction first asserts its shards' epochs, and an action refused
   * by a former owner before anything of it committed is placed again where its shards are now and
   * run again (at most the map's `retries` times); a refusal that is the answer is the map's
   * `StaleOwnerError`, never the database's raw error.
   */
  async commit(view: View, options: ActionOptions): Promise<void> {
    const shards = this.shards;
    if (shards.length > 1 && !options.allowCrossShard && !options.atomic) {
      throw new CrossShardError(
        `Action writes to shards ${shards.map((s) => s.key).join(", ")}; nothing was written. ` +
          "Keep a unit of work on one shard (colocate what is decided together), or pass { allowCrossShard: true } for one transaction per database (not atomic).",
        shards,
      );
    }
    const hook = this.executor.planner.layout.ownership;
    for (let attempt = 0; ; attempt++) {
      if (hook?.admit) for (const shard of shards) await hook.admit(shard, { write: true });
      for (const write of this.staged) write.steps = write.place();
      const steps = this.staged.flatMap((w) => w.steps);
      const failure =
        options.atomic && new Set(steps.map((s) => s.database)).size > 1
          ? await this.runAtomic(view, options, hook, steps)
          : await this.runDatabases(view, options, hook);
      if (!failure) return;
      const rejected = hook?.rejection(failure.error);
      let error = failure.error;
      if (hook && rejected) {
        countRejection(this.executor.telemetry, rejected.shard);
        if (failure.committed.length === 0 && attempt < hook.retries) {
          await hook.refresh(rejected, attempt);
          continue;
        }
        error = givenUp(hook, failure.error);
      }
      if (failure.databases === 1 || failure.atomic) throw error;
      throw new PartialCommitError(
        failure.committed,
        failure.failed.map((shard) => ({ shard, error })),
        failure.notAttempted,
      );
    }
  }

  /**
   * Runs the steps as one atomic action, telling the router's recovery (`atomicRecovery`) that one
   * starts, and when one failed (a part of it may be left prepared until recovery ends it).
   */
  private async runAtomic(
    view: View,
    options: ActionOptions,
    hook: OwnershipHook | undefined,
    steps: Step[],
  ): Promise<ActionFailure | undefined> {
    const watch = this.executor.atomic;
    watch?.used();
    try {
      const failure = await runAtomic({ executor: this.executor, view, options, begin: hook?.begin }, steps);
      if (failure) watch?.unsettled();
      return failure;
    } catch (error) {
      watch?.unsettled();
      throw error;
    }
  }

  /** Runs the staged writes as placed, one transaction per database in order; how the first failure left them. */
  private async runDatabases(
    view: View,
    options: ActionOptions,
    hook: OwnershipHook | undefined,
  ): Promise<ActionFailure | undefined> {
    const steps = this.staged.flatMap((w) => w.steps);
    const databases = [...new Set(steps.map((s) => s.database))].sort((x, y) => x - y);
    const committed: ShardIdentifier[] = [];
    const begin = hook?.begin;
    for (const [i, database] of databases.entries()) {
      const group = steps.filter((s) => s.database === database);
      const results: unknown[] = [];
      try {
        await inDatabaseTransaction(view, database, options, async (tx) => {
          // The epoch routing used, asserted first: a former owner refuses even a check that only reads.
          if (begin) {
            for (const shard of sortShards(group.flatMap((s) => s.shards)))
              await this.executor.bounded(database, () => begin(tx, shard));
          }
          for (const step of group) results.push(await step.run(tx));
        });
      } catch (error) {
        for (const step of group) step.status = "rolled-back";
        const later = steps.filter((s) => databases.indexOf(s.database) > i);
        for (const step of later) step.status = "not-attempted";
        return {
          error,
          databases: databases.length,
          committed,
          failed: sortShards(group.flatMap((s) => s.shards)),
          notAttempted: sortShards(later.flatMap((s) => s.shards)),
        };
      }
      for (const [j, step] of group.entries()) {
        step.status = "committed";
        step.value = results[j];
      }
      committed.push(...sortShards(group.flatMap((s) => s.shards)));
    }
    return undefined;
  }
}

/** Runs an action: `fn` stages writes (direct writes through the routed client are refused meanwhile). */
export async function runAction<Client extends ShardClient, R>(
  executor: Executor,
  view: View,
  fn: (unit: ActionUnit<Client>) => Promise<R> | R,
  options: ActionOptions = {},
): Promise<R> {
  if (executor.scope.getStore()) {
    throw new UnsupportedShardOperationError(
      "$action cannot run inside a shard transaction or another action",
    );
  }
  const telemetry = executor.telemetry;
  const span = telemetry?.tracing()
    ? telemetry.startSpan("shardkit $action", {
        [ATTR.system]: "postgresql",
        "shardkit.action.cross_shard": options.allowCrossShard === true,
      })
    : undefined;
  const unit = new ActionUnit<Client>(executor);
  try {
    const result = await executor.scope.run({ kind: "staging" }, async () => await fn(unit));
    await unit.commit(view, options);
    span?.setAttribute("shardkit.action.committed", unit.committedShards());
    span?.end();
    return result;
  } catch (error) {
    if (span) {
      if (error instanceof PartialCommitError) {
        span.setAttributes({
          "shardkit.action.committed": error.committed.map((s) => s.key),
          "shardkit.action.failed": error.failed.map((f) => f.shard.key),
          "shardkit.action.not_attempted": error.notAttempted.map((s) => s.key),
        });
      }
      endWithError(span, error);
    }
    throw error;
  }
}
