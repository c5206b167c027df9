// A write that sets a field unique across shards, outside a transaction: claim the value (on the
// claim's shard), write the row in its own shard transaction, then mark the claim held; an upsert
// of such a field as the update and the create it stands for.
import { isShardkitError } from "@shardkit/id";
import { isNotFound } from "../owned.js";
import { withCurrentOwner } from "../ownership.js";
import type { Obj, Plan } from "../plan.js";
import { retry } from "../retry.js";
import type { Scope, ShardScopes, View } from "../scope.js";
import { runInShardTransaction } from "../transaction.js";
import { type ClaimContext, checkClaims, holdClaims, releaseClaims, takeClaims } from "./claims.js";

/** What the claim saga needs of the executor (`Executor` is one). */
export interface SagaRunner extends ShardScopes {
  /** A routed call, planned and run (untraced: it is part of the call being traced). */
  route(view: View, model: string, operation: string, args: Obj): PromiseLike<unknown>;
  claimContext(view: View): ClaimContext;
  callOn(client: object, model: string, operation: string, args: unknown): PromiseLike<unknown>;
}

/** How many times a claimed upsert tries its update and then its create. */
const UPSERT_ROUNDS = 4;

/**
 * The options of the claim saga's row transaction: READ COMMITTED (see its use), and a longer wait
 * for a connection than Prisma's 2 s, as the claimants of one value queue on that database's pool.
 */
const ROW_STEP = { isolationLevel: "ReadCommitted", maxWait: 20_000 } as const;

/** The claim saga of a write outside any transaction: claim, then the row in its shard transaction, then hold. */
export async function claimed(
  r: SagaRunner,
  view: View,
  plan: Extract<Plan, { kind: "shard" }>,
  model: string,
  operation: string,
  args: unknown,
): Promise<unknown> {
  const context = r.claimContext(view);
  const taken = await atOwner(r, () => takeClaims(context, plan.claims!));
  let result: unknown;
  try {
    // READ COMMITTED whatever the database's default: the token check after the value's lock must
    // see a void mark committed while it waited (under REPEATABLE READ it would fail with 40001).
    result = await runInShardTransaction(r, view, plan.shard, ROW_STEP, async () => {
      const scope = r.scope.getStore() as Extract<Scope, { kind: "tx" }>;
      await checkClaims(scope.tx, taken);
      return r.callOn(scope.tx, model, operation, args);
    });
  } catch (error) {
    // Settled, not deleted: if the row did commit (an error after the commit), its claims stay.
    await atOwner(r, () => releaseClaims(context, taken)).catch(() => {});
    throw error;
  }
  // A failure here leaves the claims pending with their row: `repairClaims` (or the next claimant) holds them.
  await atOwner(r, () => holdClaims(context, taken)).catch(() => {});
  return result;
}

/** In the caller's transaction: claim first (committed on the claims' shards), then the check and the row in it. */
export async function claimedIn(
  r: SagaRunner,
  view: View,
  tx: object,
  plan: Extract<Plan, { kind: "shard" }>,
  model: string,
  operation: string,
  args: unknown,
): Promise<unknown> {
  // A rollback leaves the claims void, to be settled by the next claimant.
  const taken = await atOwner(r, () => takeClaims(r.claimContext(view), plan.claims!));
  await checkClaims(tx, taken);
  return r.callOn(tx, model, operation, args);
}

/** Whether an upsert of `model` names a field unique across shards (in where, create or update). */
export function claimsIn(r: ShardScopes, model: string, args: Obj): boolean {
  const unique = r.planner.keys.uniqueOf(model);
  if (unique.length === 0) return false;
  return [args.where, args.create, args.update].some(
    (part) => !!part && typeof part === "object" && unique.some((u) => (part as Obj)[u.field] !== undefined),
  );
}

/**
 * An upsert that names a field unique across shards, as the update and the create it stands for,
 * each routed and claimed as on its own: the update of the row `where` finds (through its claim
 * when `where` names the field), else the create. A create that loses its value to a row written
 * meanwhile (the other half of two concurrent upserts) is an update of that row after all; a value
 * still lost after four rounds throws `UniqueViolationError`. Not one statement: the row is found,
 * then written, as two calls (a claim has to be taken before its row).
 */
export async function upsertClaimed(r: SagaRunner, view: View, model: string, args: Obj): Promise<unknown> {
  const { where, create, update, ...shape } = args;
  // In a transaction, a failed statement (Prisma's P2002) has aborted it: only a claim lost before
  // the row was written (UniqueViolationError, no statement failed) may be followed by another round.
  const inTransaction = r.scope.getStore()?.kind === "tx";
  const lost = (error: unknown) =>
    isShardkitError(error, "UNIQUE_VIOLATION") ||
    (!inTransaction && (error as { code?: unknown })?.code === "P2002");
  let creating = false;
  // A create that lost its value to another write: its row is updated next round. Two upserts of
  // one new value that keep taking it from each other step apart, at random.
  return retry(
    async () => {
      creating = false;
      try {
        return await r.route(view, model, "update", { ...shape, where, data: update ?? {} });
      } catch (error) {
        // The update's own values are claimed before its row is looked for: a value held elsewhere
        // refuses the update, which only counts if there is a row to update.
        const absent =
          isNotFound(error) ||
          (isShardkitError(error, "UNIQUE_VIOLATION") &&
            (await r.route(view, model, "findUnique", { where })) === null);
        if (!absent) throw error;
      }
      creating = true;
      return await r.route(view, model, "create", { ...shape, data: create ?? {} });
    },
    { retries: UPSERT_ROUNDS - 1, retryable: (error) => creating && lost(error) },
  );
}

/**
 * Runs a step of the claim saga on the claims' shards; a former owner's refusal (a claim's shard
 * moved) refreshes the map and runs it again at the current owner. Each step may run again: a
 * claim already this row's is left as it is.
 */
function atOwner<R>(r: ShardScopes, step: () => Promise<R>): Promise<R> {
  return withCurrentOwner(r.planner.layout.ownership, step, r.telemetry);
}
