import type { ShardIdentifier } from "@shardkit/id";
import { CrossShardError, PartialCommitError, ShardKeyRequiredError, ShardRoutingError } from "./errors.js";
import { type ShardExecutor, shardScope } from "./execute.js";
import { type OutboxEventInput, outboxRecord } from "./outbox.js";
import type { ShardClient, ShardOrId } from "./registry.js";
import type { TransactionClient, TransactionOptions } from "./transaction.js";
import { runInShardTransaction } from "./transaction.js";

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

export type StagedStatus = "staged" | "committed" | "rolled-back" | "not-attempted";

/**
 * A write staged in an action. Its result is readable once its shard's transaction committed.
 * A write whose `in` list or rows span shards is one write per shard; its result adds up counts.
 */
export class StagedWrite<T = unknown> {
  private state: StagedStatus = "staged";
  private value: unknown;

  /** @internal */
  constructor(
    /** The shards it writes to (one, unless an `in` list or createMany rows span shards). */
    readonly shards: readonly ShardIdentifier[],
    readonly description: string,
    /** @internal */ readonly execute: ((tx: object) => Promise<unknown>) | undefined,
    private readonly parts: readonly StagedWrite[] = [],
  ) {}

  get status(): StagedStatus {
    if (this.parts.length === 0) return this.state;
    return this.parts.find((part) => part.status !== "committed")?.status ?? "committed";
  }

  /** The operation's result. Throws unless every shard it writes to committed. */
  get result(): T {
    const status = this.status;
    if (status !== "committed") {
      throw new ShardRoutingError(
        "PARTIAL_COMMIT",
        `${this.description} on shard ${this.shards.map((s) => s.key).join(", ")} is ${status}`,
      );
    }
    if (this.parts.length === 0) return this.value as T;
    return {
      count: this.parts.reduce((sum, part) => sum + (part.result as { count: number }).count, 0),
    } as T;
  }

  /** @internal */
  settle(status: StagedStatus, value?: unknown): void {
    this.state = status;
    if (status === "committed") this.value = value;
  }
}

export interface ActionOptions extends TransactionOptions {
  /**
   * Let the action write to several shards: one transaction per shard, in shard-bits order, no
   * retry, and a `PartialCommitError` that says exactly what committed if one fails. It is never
   * atomic across shards. Default `false`: staging for two shards throws `CrossShardError`
   * before anything is written.
   */
  allowCrossShard?: boolean;
}

/**
 * A unit of work: writes are staged (nothing runs while the action's function runs), then grouped
 * by shard and run in one transaction per shard. Reads through the routed client run at once.
 */
export class ActionUnit<Client extends ShardClient> {
  private readonly staged: StagedWrite[] = [];

  /** @internal */
  constructor(private readonly executor: ShardExecutor<Client>) {}

  create<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "create">,
  ): StagedWrite<ResultOf<Client, M, "create">> {
    return this.stage(model, "create", args);
  }
  createMany<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "createMany">,
  ): StagedWrite<{ count: number }> {
    return this.stage(model, "createMany", args);
  }
  update<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "update">,
  ): StagedWrite<ResultOf<Client, M, "update">> {
    return this.stage(model, "update", args);
  }
  updateMany<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "updateMany">,
  ): StagedWrite<{ count: number }> {
    return this.stage(model, "updateMany", args);
  }
  upsert<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "upsert">,
  ): StagedWrite<ResultOf<Client, M, "upsert">> {
    return this.stage(model, "upsert", args);
  }
  delete<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "delete">,
  ): StagedWrite<ResultOf<Client, M, "delete">> {
    return this.stage(model, "delete", args);
  }
  deleteMany<M extends ModelKey<Client>>(
    model: M,
    args: ArgsOf<Client, M, "deleteMany">,
  ): StagedWrite<{ count: number }> {
    return this.stage(model, "deleteMany", args);
  }

  /**
   * Stages arbitrary work on one shard: `fn` runs inside that shard's transaction, after the
   * writes staged before it (a balance check that throws rolls the shard back).
   */
  on<T>(shardOrId: ShardOrId, fn: (tx: TransactionClient<Client>) => Promise<T>): StagedWrite<T> {
    const shard = this.executor.registry.resolve(shardOrId);
    const write = new StagedWrite<T>([shard], `step on ${shard.key}`, (tx) =>
      fn(tx as TransactionClient<Client>),
    );
    this.staged.push(write);
    return write;
  }

  /**
   * Stages an outbox event on a shard: written in that shard's transaction, so it commits exactly
   * when the state does. Needs the models of `schema/shardkit.prisma` in the schema.
   */
  emit(shardOrId: ShardOrId, event: OutboxEventInput): StagedWrite<{ id: string }> {
    if (!this.executor.isDelegate("outboxEvent")) {
      throw new ShardRoutingError(
        "INVALID_CONFIG",
        "this client has no OutboxEvent model: add the models of @shardkit/prisma/schema/shardkit.prisma to your schema",
      );
    }
    return this.stage("outboxEvent", "create", {
      data: outboxRecord(this.executor.registry.resolve(shardOrId), event),
    });
  }

  /** The shards the staged writes touch, in the order their transactions will run. */
  get shards(): ShardIdentifier[] {
    return [...new Set(this.staged.map((w) => w.shards[0]!))].sort((a, b) => a.bits - b.bits);
  }

  private stage<T>(delegate: string, operation: WriteOperation, args: unknown): StagedWrite<T> {
    const model = this.executor.modelOf(delegate);
    const plan = this.executor.router.plan(model, operation, args as Record<string, unknown>);
    if (plan.kind === "keyless") throw new ShardKeyRequiredError(model, operation, plan.hint);
    const parts = plan.kind === "shard" ? [{ shard: plan.shard, args }] : plan.parts;
    const writes = parts.map(
      (part) =>
        new StagedWrite([part.shard], `${model}.${operation}`, (tx) =>
          this.executor.callInScope(tx, part.shard, model, operation, part.args),
        ),
    );
    this.staged.push(...writes);
    if (writes.length === 1) return writes[0] as StagedWrite<T>;
    return new StagedWrite<T>(
      parts.map((p) => p.shard),
      `${model}.${operation}`,
      undefined,
      writes,
    );
  }

  /** @internal Groups the staged writes by shard and runs them. */
  async commit(options: ActionOptions): Promise<void> {
    const groups = new Map<ShardIdentifier, StagedWrite[]>();
    for (const write of this.staged) {
      const shard = write.shards[0]!;
      const list = groups.get(shard);
      if (list) list.push(write);
      else groups.set(shard, [write]);
    }
    const order = [...groups.keys()].sort((a, b) => a.bits - b.bits);
    if (order.length > 1 && !options.allowCrossShard) {
      throw new CrossShardError(
        `Action writes to shards ${order.map((s) => s.key).join(", ")}; nothing was written. ` +
          "Keep a unit of work on one shard (colocate what is decided together), or pass { allowCrossShard: true } for one transaction per shard (not atomic).",
        order,
      );
    }
    const committed: ShardIdentifier[] = [];
    for (const [i, shard] of order.entries()) {
      const writes = groups.get(shard)!;
      const results: unknown[] = [];
      try {
        await runInShardTransaction(this.executor, shard, options, async (tx) => {
          for (const write of writes) results.push(await write.execute!(tx));
        });
      } catch (error) {
        for (const write of writes) write.settle("rolled-back");
        const rest = order.slice(i + 1);
        for (const later of rest) for (const write of groups.get(later)!) write.settle("not-attempted");
        if (order.length === 1) throw error;
        throw new PartialCommitError(committed, [{ shard, error }], rest);
      }
      for (const [j, write] of writes.entries()) write.settle("committed", results[j]);
      committed.push(shard);
    }
  }
}

/** Runs an action: `fn` stages writes (direct writes through the routed client are refused meanwhile). */
export async function runAction<Client extends ShardClient, R>(
  executor: ShardExecutor<Client>,
  fn: (unit: ActionUnit<Client>) => Promise<R> | R,
  options: ActionOptions = {},
): Promise<R> {
  if (shardScope.getStore()) {
    throw new ShardRoutingError(
      "UNSUPPORTED",
      "$action cannot run inside a shard transaction or another action",
    );
  }
  const unit = new ActionUnit(executor);
  const result = await shardScope.run({ kind: "staging" }, async () => await fn(unit));
  await unit.commit(options);
  return result;
}
