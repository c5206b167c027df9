// An atomic action: two-phase commit over the databases an action writes to. Each database runs its
// staged writes in its own transaction and prepares it; the first database (in the registry's order)
// also records the decision in that transaction, so committing it is the commit point. Then the
// others commit. Before that point, anything that fails rolls back everywhere; after it, whatever
// is left prepared is committed by recovery (atomic-recover.ts), which any router runs.
import type { ShardIdentifier } from "@shardkit/id";
import {
  type AtomicFacts,
  COORDINATOR,
  checkAtomic,
  decisionId,
  endPrepared,
  factsOf,
  formatGid,
  INSERT_DECISION,
  newActionId,
  preparedAt,
  READ_DECISION,
  raw,
} from "./atomic-sql.js";
import {
  AtomicAbortedError,
  AtomicInDoubtError,
  DatabaseUnavailableError,
  isShardkitError,
} from "./errors.js";
import type { ShardScopes, View } from "./scope.js";
import { inDatabaseTransaction, type TransactionOptions } from "./transaction.js";
import { isConnectionFailure } from "./unavailable.js";

/** Where an atomic action's coordinator is: after a database prepared, after the decision, after a commit. */
export type AtomicPoint = "prepared" | "decided" | "committed";

/** One statement of a staged write, on one database (action.ts's `Step`). */
export interface AtomicStep {
  database: number;
  shards: readonly ShardIdentifier[];
  run(tx: object): PromiseLike<unknown>;
  status: string;
  value?: unknown;
}

/** Where an action's run stopped: the error, and its shards by outcome. */
export interface ActionFailure {
  error: unknown;
  /** How many databases the action was placed on. */
  databases: number;
  committed: ShardIdentifier[];
  failed: ShardIdentifier[];
  notAttempted: ShardIdentifier[];
  /** An atomic action's: nothing of it committed anywhere. */
  atomic?: boolean;
}

export interface AtomicContext {
  executor: ShardScopes & {
    databaseName(index: number): string | undefined;
    readonly timeoutMs: number;
    atomic?: { unsettled(): void } | undefined;
  };
  view: View;
  options: TransactionOptions & {
    /** @internal Called at each point of the protocol (tests stop a coordinator there). */
    atomicProbe?: ((point: AtomicPoint, database: number) => Promise<void> | void) | undefined;
  };
  /** The epoch check of a partition map, run first in each transaction (a former owner refuses). */
  begin?: ((tx: object, shard: ShardIdentifier) => Promise<void>) | undefined;
}

interface Participant {
  database: number;
  facts: AtomicFacts;
  shards: ShardIdentifier[];
  steps: AtomicStep[];
  gid: string;
  results?: unknown[];
}

/**
 * Runs `steps` (over two or more databases) as one atomic action; how it failed, with nothing of it
 * committed, or undefined once it committed (every participant's data is decided; a participant
 * whose own commit did not answer is committed by recovery). Throws `AtomicInDoubtError` when the
 * deciding database did not answer its commit.
 */
export async function runAtomic(
  context: AtomicContext,
  steps: readonly AtomicStep[],
): Promise<ActionFailure | undefined> {
  const { executor, view } = context;
  const databases = [...new Set(steps.map((s) => s.database))].sort((x, y) => x - y);
  const name = (d: number) => executor.databaseName(d) ?? `database #${d}`;
  const facts = await checkAtomic(databases, name, (d) =>
    executor
      .bounded(d, () => factsOf(view.clients[d]!))
      .catch((error: unknown) => {
        throw named(context, d, error);
      }),
  );
  const action = newActionId();
  const parts: Participant[] = databases.map((database, i) => {
    const own = steps.filter((s) => s.database === database);
    const shards = sortShards(own.flatMap((s) => s.shards));
    const gid = formatGid({
      action,
      coordinator: COORDINATOR,
      participants: databases.length,
      decider: facts[0]!.id,
      self: facts[i]!.id,
      shards: shards.map((s) => s.bits),
    });
    return { database, facts: facts[i]!, shards, steps: own, gid };
  });
  const id = decisionId({ action, coordinator: COORDINATOR });
  const record = JSON.stringify(
    parts.map((p) => ({ database: p.facts.id, shards: p.shards.map((s) => s.bits) })),
  );
  const prepared = await Promise.allSettled(
    parts.map((p, i) => prepare(context, p, i === 0 ? record : undefined, id)),
  );
  const failedAt = prepared.findIndex((r) => r.status === "rejected");
  if (failedAt >= 0) {
    await rollBack(context, parts);
    return aborted(
      parts,
      named(context, parts[failedAt]!.database, (prepared[failedAt] as PromiseRejectedResult).reason),
      parts.filter((_, i) => prepared[i]!.status === "rejected"),
    );
  }
  const decided = await decide(context, parts[0]!, id, parts);
  if (decided !== "commit") {
    await rollBack(context, parts.slice(1));
    return aborted(parts, decided, []);
  }
  for (const p of parts) {
    p.steps.forEach((step, j) => {
      step.status = "committed";
      step.value = p.results![j];
    });
  }
  await context.options.atomicProbe?.("decided", parts[0]!.database);
  // Decided: the others commit in database order; one that does not answer now is recovery's to
  // finish (its rows stay locked until then).
  for (const p of parts.slice(1)) {
    try {
      await executor.bounded(p.database, () => endPrepared(view.clients[p.database]!, "COMMIT", p.gid));
    } catch {
      // Left prepared: the router's own recovery (atomic-auto.ts) comes back for it.
      executor.atomic?.unsettled();
      continue;
    }
    await context.options.atomicProbe?.("committed", p.database);
  }
  return undefined;
}

/**
 * One participant's transaction: the epoch checks, its staged writes, the decision (the decider's),
 * then PREPARE. A database that stops answering fails it within the router's deadline (a
 * `DatabaseTimeoutError` naming it), never a hang: the transaction's start and each statement are
 * bounded, and neither a failure nor a PREPARE waits for the transaction's end (after PREPARE,
 * Prisma's COMMIT has nothing left to do; after a failure, its ROLLBACK reaches a frozen server when
 * it resumes, and a PREPARE that was on its way there is recovery's to roll back). Its statements wait
 * at most that long for a row lock too (`lock_timeout`): one waiting for a row that another action
 * holds prepared gives up on the server, and frees its connection, which the holder's own commit may
 * need (a pool, or a pooler's server connections, all held by such waiters would otherwise stay so).
 */
async function prepare(context: AtomicContext, p: Participant, record: string | undefined, id: string) {
  const { executor, view, begin } = context;
  const bounded = <T>(run: () => PromiseLike<T>) => executor.bounded(p.database, run);
  let entered!: () => void;
  const started = new Promise<void>((resolve) => (entered = resolve));
  let prepared!: (results: unknown[]) => void;
  let failed!: (error: unknown) => void;
  const outcome = new Promise<unknown[]>((resolve, reject) => {
    prepared = resolve;
    failed = reject;
  });
  outcome.catch(() => {}); // a start that failed is thrown by the race below, not by this
  // The start's deadline error, once it missed it (the action is aborted then): a transaction that
  // starts late prepares nothing, so no prepared transaction holds its rows until recovery's lease.
  let abandoned: unknown;
  const transaction = inDatabaseTransaction(view, p.database, context.options, async (tx) => {
    entered();
    try {
      if (abandoned) throw abandoned;
      const lockMs = Math.max(1, Math.min(Math.ceil(executor.timeoutMs), 2 ** 31 - 1));
      await bounded(() => raw(tx).$executeRawUnsafe(`SET LOCAL lock_timeout = ${lockMs}`));
      if (begin) for (const shard of p.shards) await bounded(() => begin(tx, shard));
      const results: unknown[] = [];
      for (const step of p.steps) results.push(await bounded(() => step.run(tx)));
      if (record !== undefined)
        await bounded(() => raw(tx).$executeRawUnsafe(INSERT_DECISION, id, "commit", COORDINATOR, record));
      if (abandoned) throw abandoned;
      await bounded(() => raw(tx).$executeRawUnsafe(`PREPARE TRANSACTION '${p.gid}'`));
      prepared(results);
    } catch (error) {
      failed(error);
      throw error;
    }
  });
  transaction.catch(failed); // a start that failed; later failures are the callback's, told already
  await bounded(() => Promise.race([started, transaction])).catch((error: unknown) => {
    abandoned = error;
    throw error;
  });
  p.results = await outcome;
  await context.options.atomicProbe?.("prepared", p.database);
}

/**
 * Commits the deciding database's prepared transaction, the commit point: "commit" once it did (or
 * its decision row says it did), else the error of an action rolled back (recovery ended it first, or
 * it could not commit and was rolled back now). Throws `AtomicInDoubtError` when that is unknown.
 */
async function decide(
  context: AtomicContext,
  decider: Participant,
  id: string,
  parts: readonly Participant[],
): Promise<"commit" | AtomicAbortedError> {
  const { executor, view } = context;
  const client = view.clients[decider.database]!;
  const shards = sortShards(parts.flatMap((p) => p.shards));
  let ended: "done" | "gone" | "busy" | undefined;
  let failure: unknown;
  try {
    ended = await executor.bounded(decider.database, () => endPrepared(client, "COMMIT", decider.gid));
    if (ended === "done") return "commit";
  } catch (error) {
    failure = error;
  }
  try {
    // What became of it, asked within the same deadline: a decider that hangs leaves it in doubt.
    // Whether it is still prepared is asked first: a COMMIT PREPARED that missed its deadline may
    // still be running, and its decision row becomes visible by the time the transaction has left
    // the prepared ones, never after (read the other way round, a commit ending between the two
    // reads would be taken for none, and the other databases rolled back).
    const decided = await executor.bounded(decider.database, async () => {
      const still = (await preparedAt(client)).some((x) => x.gid === decider.gid);
      if (still) {
        const undone = await endPrepared(client, "ROLLBACK", decider.gid);
        if (undone === "done") return false;
        if (undone === "busy") throw new AtomicInDoubtError(id, shards);
        // Gone between the two reads (its commit ended, or recovery concluded it): its row tells.
      }
      const [row] = await raw(client).$queryRawUnsafe<{ decision: string }[]>(READ_DECISION, id);
      return row?.decision === "commit";
    });
    if (decided) return "commit";
  } catch (error) {
    throw error instanceof AtomicInDoubtError ? error : new AtomicInDoubtError(id, shards, { cause: error });
  }
  return new AtomicAbortedError(
    id,
    ended === "gone"
      ? "recovery concluded it before its coordinator committed (the coordinator took longer than the lease)"
      : "its deciding database did not commit",
    { cause: failure },
  );
}

/** Rolls back each participant's prepared transaction that is there; one that does not answer is recovery's. */
async function rollBack(context: AtomicContext, parts: readonly Participant[]): Promise<void> {
  const { executor, view } = context;
  await Promise.allSettled(
    parts.map((p) =>
      executor.bounded(p.database, () => endPrepared(view.clients[p.database]!, "ROLLBACK", p.gid)),
    ),
  );
}

function aborted(
  parts: readonly Participant[],
  error: unknown,
  failed: readonly Participant[],
): ActionFailure {
  for (const p of parts) for (const step of p.steps) step.status = "rolled-back";
  return {
    error,
    databases: parts.length,
    committed: [],
    failed: sortShards(failed.flatMap((p) => p.shards)),
    notAttempted: [],
    atomic: true,
  };
}

/**
 * A participant's failure as the caller sees it: a database that could not be reached, or whose
 * connection broke, is named with its shards (`DatabaseUnavailableError`, the driver's error its
 * cause); any other error (a step's own, a wait for a connection) is left as it is.
 */
function named(context: AtomicContext, database: number, error: unknown): unknown {
  if (isShardkitError(error) || !isConnectionFailure(error)) return error;
  const { executor } = context;
  return new DatabaseUnavailableError(
    executor.databaseName(database) ?? `database #${database}`,
    executor.planner.layout.databases[database]?.shards ?? [],
    error,
  );
}

export function sortShards(shards: readonly ShardIdentifier[]): ShardIdentifier[] {
  return [...new Set(shards)].sort((a, b) => a.bits - b.bits);
}
