// The ledger: every change of a balance is written with its entry, in the same shard transaction.
import { ShardedId } from "@shardkit/id";
import { WalletError } from "./errors.js";
import type { Wallet } from "./generated/prisma/client.js";
import type { Tx } from "./shards.js";

/**
 * Changes a balance by `delta` and writes its ledger entry, in the caller's shard transaction `tx`.
 * A debit only applies when the balance covers it (checked by the UPDATE itself, so concurrent
 * debits cannot overdraw): else INSUFFICIENT_FUNDS, or NOT_FOUND when there is no such wallet.
 */
export async function moveBalance(
  tx: Tx,
  walletId: string,
  delta: bigint,
  kind: string,
  transferId?: string,
): Promise<Wallet> {
  const where = delta < 0n ? { id: walletId, balance: { gte: -delta } } : { id: walletId };
  const { count } = await tx.wallet.updateMany({ where, data: { balance: { increment: delta } } });
  if (count === 0) {
    const exists = await tx.wallet.findUnique({ where: { id: walletId } });
    if (!exists) throw new WalletError("NOT_FOUND", `wallet ${walletId} not found`);
    throw new WalletError("INSUFFICIENT_FUNDS", `wallet ${walletId} has ${exists.balance}, needs ${-delta}`);
  }
  const wallet = await tx.wallet.findUniqueOrThrow({ where: { id: walletId } });
  await tx.entry.create({
    data: {
      id: ShardedId.colocatedWith("Entry", walletId),
      walletId,
      kind,
      amount: delta,
      balanceAfter: wallet.balance,
      transferId: transferId ?? null,
    },
  });
  return wallet;
}
