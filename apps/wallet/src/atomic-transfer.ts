// An atomic transfer between two wallets, wherever they live: one `$action(..., { atomic: true })`
// that debits the source (with its ledger entry and a `completed` transfer) on the source's shard and
// credits the destination (with its entry) on the destination's, all or nothing (two-phase commit
// when the shards are on two databases). The saga (`WalletService.transfer`) stays the default: it
// needs no server setting and never holds a lock across databases; this one needs every server at
// max_prepared_transactions > 0 and holds both wallets' rows from prepare to commit (docs/atomic-commit.md).
import { isShardkitError, ShardedId, type ShardIdentifier } from "@shardkit/id";
import {
  idempotent,
  isShardUnavailable,
  isTransientTransactionError,
  withShardDeadline,
} from "@shardkit/prisma";
import { WalletError } from "./errors.js";
import type { Transfer } from "./generated/prisma/client.js";
import { moveBalance } from "./ledger.js";
import type { Shards, Tx } from "./shards.js";
import type { Outcome } from "./wallet-service.js";

/** Runs of an atomic transfer that lost a race (a lock across databases, a deadlock) before it answers 503. */
const ATTEMPTS = 4;
/**
 * How long a step waits for a row lock. Two opposite transfers between the same two databases can
 * each hold one wallet while waiting for the other (a deadlock across databases, which no server
 * sees): the lock timeout ends it, nothing of either is committed, and the loser runs again.
 */
const LOCK_TIMEOUT = "1s";

export interface AtomicTransferInput {
  fromWalletId: string;
  toWalletId: string;
  amount: bigint;
  /** The caller's Idempotency-Key (namespaced): the transfer is made once per key. */
  key: string;
  /** How long the call waits before answering 503 (the transfer may still conclude; retry with the key). */
  deadlineMs: number;
  /** The shard an ID names (WalletService.shardOf: malformed IDs and unknown shards refused). */
  shardOf(id: string, what: string): ShardIdentifier;
}

/** `moveBalance` in `tx`, waiting at most the lock timeout for the wallet's row. */
async function move(tx: Tx, walletId: string, delta: bigint, kind: string, transferId: string) {
  await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
  await moveBalance(tx, walletId, delta, kind, transferId);
}

/** A step that waited longer than the lock timeout (SQLSTATE 55P03), anywhere in the error's causes. */
function lockTimedOut(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, originalCode, message } = e as {
      code?: unknown;
      originalCode?: unknown;
      message?: unknown;
    };
    if (code === "55P03" || originalCode === "55P03") return true;
    if (typeof message === "string" && /55P03|lock timeout/.test(message)) return true;
  }
  return false;
}

/**
 * The transfer, once per key: both sides record the key in the same atomic action (the source under
 * `key`, the destination under `key#credit`), so a retry finds both recorded and changes nothing. A
 * refusal (insufficient funds, a currency mismatch) rolls back both sides and records nothing.
 */
function once(shards: Shards, t: AtomicTransferInput, from: ShardIdentifier, to: ShardIdentifier) {
  const { db } = shards;
  const { fromWalletId, toWalletId, amount, key } = t;
  const request = { fromWalletId, toWalletId, amount };
  return db.$action(
    async (unit) => {
      // Reads run at once: both wallets exist and hold one currency (a wallet's currency never changes).
      const [source, target] = await Promise.all([
        db.wallet.findUnique({ where: { id: fromWalletId } }),
        db.wallet.findUnique({ where: { id: toWalletId } }),
      ]);
      if (!source) throw new WalletError("NOT_FOUND", `wallet ${fromWalletId} not found`);
      if (!target) throw new WalletError("NOT_FOUND", `wallet ${toWalletId} not found`);
      if (target.currency !== source.currency)
        throw new WalletError(
          "CURRENCY_MISMATCH",
          `cannot move ${source.currency} into a ${target.currency} wallet`,
        );
      const transferId = ShardedId.colocatedWith("Transfer", fromWalletId);
      const debit = unit.on(fromWalletId, (tx) =>
        idempotent(tx, { shard: from, kind: "transfer.atomic", key }, request, async () => {
          await move(tx, fromWalletId, -amount, "transfer_out", transferId);
          return tx.transfer.create({
            data: { id: transferId, fromWalletId, toWalletId, amount, status: "completed" },
          });
        }),
      );
      unit.on(toWalletId, (tx) =>
        idempotent(tx, { shard: to, kind: "transfer.atomic.credit", key: `${key}#credit` }, request, () =>
          move(tx, toWalletId, amount, "transfer_in", transferId),
        ),
      );
      return debit;
    },
    { atomic: true },
  );
}

/**
 * Moves `amount` between two wallets atomically. Answers: the `completed` transfer (or the one a
 * retry with the key recorded); NOT_FOUND, CURRENCY_MISMATCH, INSUFFICIENT_FUNDS with nothing
 * changed anywhere; ATOMIC_UNAVAILABLE (501) on servers that cannot prepare transactions;
 * SHARD_UNAVAILABLE (503) when a shard did not answer, the transfer kept losing races (nothing
 * changed), or its outcome is not known yet (`outcome: "unknown"`: retry with the same key).
 */
export async function transferAtomic(shards: Shards, t: AtomicTransferInput): Promise<Outcome<Transfer>> {
  const from = t.shardOf(t.fromWalletId, "source wallet");
  const to = t.shardOf(t.toWalletId, "destination wallet");
  if (t.fromWalletId === t.toWalletId)
    throw new WalletError("VALIDATION", "a transfer needs two different wallets");
  const unknown = (message: string, cause: unknown) =>
    new WalletError("SHARD_UNAVAILABLE", message, { shard: from.key, outcome: "unknown" }, { cause });
  try {
    return await withShardDeadline(from, t.deadlineMs, async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const staged = await once(shards, t, from, to);
          const outcome = staged.result;
          return { result: outcome.result as Transfer, replayed: outcome.replayed };
        } catch (error) {
          const race = isTransientTransactionError(error) || lockTimedOut(error);
          if (!race || attempt >= ATTEMPTS) throw error;
        }
      }
    });
  } catch (error) {
    if (error instanceof WalletError) throw error;
    if (isShardkitError(error, "ATOMIC_UNAVAILABLE"))
      throw new WalletError(
        "ATOMIC_UNAVAILABLE",
        "atomic transfers need every database's server at max_prepared_transactions > 0 and the AtomicDecision table; use POST /transfers",
        {},
        { cause: error },
      );
    if (isShardkitError(error, "ATOMIC_IN_DOUBT") || isShardkitError(error, "SHARD_TIMEOUT"))
      throw unknown(
        "the transfer's outcome is not known yet (recovery commits or rolls it back everywhere); retry with the same Idempotency-Key",
        error,
      );
    if (
      isShardkitError(error, "ATOMIC_ABORTED") ||
      isShardUnavailable(error) ||
      isTransientTransactionError(error) ||
      lockTimedOut(error)
    )
      throw new WalletError(
        "SHARD_UNAVAILABLE",
        `the transfer did not happen (${isShardkitError(error, "ATOMIC_ABORTED") ? "rolled back everywhere" : "a shard is unavailable or busy"}); retry later`,
        { shard: from.key },
        { cause: error },
      );
    throw error;
  }
}
