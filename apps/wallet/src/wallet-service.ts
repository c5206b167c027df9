import { isShardkitError, ShardedId, type ShardIdentifier } from "@shardkit/id";
import { consumeOnce, emitEvent, type OutboxMessage } from "@shardkit/prisma";
import { type Outcome, TRANSACTION } from "@shardkit/service-kit/calls";
import { CustomerService } from "@shardkit/service-kit/customers";
import { transferAtomic } from "./atomic-transfer.js";
import { type CustomerProps, createCustomerSelector } from "./customer-selector.js";
import { WalletError } from "./errors.js";
import type { Customer, Entry, Transfer, Wallet } from "./generated/prisma/client.js";
import { moveBalance } from "./ledger.js";
import type { Shards, Tx } from "./shards.js";

export const TOPICS = {
  debited: "transfer.debited",
  credited: "transfer.credited",
  refused: "transfer.credit_refused",
} as const;

type TransferDebited = {
  transferId: string;
  fromWalletId: string;
  toWalletId: string;
  amount: bigint;
  currency: string;
};
type TransferCredited = { transferId: string };
type TransferRefused = { transferId: string; reason: string };

export type { Outcome };

/**
 * The wallet service. Money never leaves a shard without a record on it: a transfer between two
 * shards debits the source and writes a `transfer.debited` event in one source-shard transaction;
 * the relay delivers it; the destination credits (or refuses) in one destination-shard
 * transaction with its own event; the source then completes or refunds the transfer.
 */
export class WalletService extends CustomerService<Shards, Tx> {
  /** `deadlineMs`: how long a call waits for its shard's database before answering 503 (default 5 s). */
  constructor(shards: Shards, options: { deadlineMs?: number } = {}) {
    super(shards, { selector: createCustomerSelector(shards.registry.shards), errors: WalletError }, options);
  }

  /**
   * One transaction on a shard. A transaction that lost a race (a deadlock, no transaction slot in
   * time) runs again, a few times; one whose shard is down, or that kept losing, is
   * SHARD_UNAVAILABLE (503, with a retry hint) naming the shard, with the database's error as its
   * cause (so the relay retries a saga step until the shard is back).
   */
  private inShard<R>(shardOrId: ShardIdentifier | string, fn: (tx: Tx) => Promise<R>): Promise<R> {
    return this.calls.onShard(shardOrId, () => this.db.$transactionOn(shardOrId, fn, TRANSACTION));
  }

  createCustomer(input: CustomerProps & { name: string }, key: string): Promise<Outcome<Customer>> {
    return this.placeCustomer(input, key, (tx, id) =>
      tx.customer.create({ data: { id, name: input.name, region: input.region, tenant: input.tenant } }),
    );
  }

  openWallet(customerId: string, currency: string, key: string): Promise<Outcome<Wallet>> {
    const shard = this.shardOf(customerId, "customer");
    return this.calls.command(shard, "wallet", key, { customerId, currency }, async (tx) => {
      const customer = await tx.customer.findUnique({ where: { id: customerId } });
      if (!customer) throw new WalletError("NOT_FOUND", `customer ${customerId} not found`);
      return tx.wallet.create({
        data: { id: ShardedId.colocatedWith("Wallet", customerId), customerId, currency },
      });
    });
  }

  deposit(walletId: string, amount: bigint, key: string): Promise<Outcome<Wallet>> {
    this.shardOf(walletId, "wallet");
    return this.calls.command(walletId, "deposit", key, { walletId, amount }, (tx) =>
      moveBalance(tx, walletId, amount, "deposit"),
    );
  }

  withdraw(walletId: string, amount: bigint, key: string): Promise<Outcome<Wallet>> {
    this.shardOf(walletId, "wallet");
    return this.calls.command(walletId, "withdraw", key, { walletId, amount }, (tx) =>
      moveBalance(tx, walletId, -amount, "withdrawal"),
    );
  }

  /**
   * Same shard: one transaction, completed at once. Across shards: debit and a pending transfer
   * on the source shard with a `transfer.debited` event; the saga finishes it.
   */
  transfer(
    fromWalletId: string,
    toWalletId: string,
    amount: bigint,
    key: string,
  ): Promise<Outcome<Transfer>> {
    const from = this.shardOf(fromWalletId, "source wallet");
    const to = this.shardOf(toWalletId, "destination wallet");
    if (fromWalletId === toWalletId)
      throw new WalletError("VALIDATION", "a transfer needs two different wallets");
    return this.calls.command(from, "transfer", key, { fromWalletId, toWalletId, amount }, async (tx) => {
      const transferId = ShardedId.colocatedWith("Transfer", fromWalletId);
      const source = await tx.wallet.findUnique({ where: { id: fromWalletId } });
      if (!source) throw new WalletError("NOT_FOUND", `wallet ${fromWalletId} not found`);
      if (from === to) {
        // Both wallets locked in ID order first: opposite transfers between them queue, never deadlock.
        await tx.$queryRawUnsafe(
          `SELECT id FROM "Wallet" WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
          [fromWalletId, toWalletId],
        );
        const target = await tx.wallet.findUnique({ where: { id: toWalletId } });
        if (!target) throw new WalletError("NOT_FOUND", `wallet ${toWalletId} not found`);
        if (target.currency !== source.currency) {
          throw new WalletError(
            "CURRENCY_MISMATCH",
            `cannot move ${source.currency} into a ${target.currency} wallet`,
          );
        }
        const transfer = await tx.transfer.create({
          data: { id: transferId, fromWalletId, toWalletId, amount, status: "completed" },
        });
        await moveBalance(tx, fromWalletId, -amount, "transfer_out", transferId);
        await moveBalance(tx, toWalletId, amount, "transfer_in", transferId);
        return transfer;
      }
      const transfer = await tx.transfer.create({
        data: { id: transferId, fromWalletId, toWalletId, amount, status: "pending" },
      });
      await moveBalance(tx, fromWalletId, -amount, "transfer_out", transferId);
      const payload: TransferDebited = {
        transferId,
        fromWalletId,
        toWalletId,
        amount,
        currency: source.currency,
      };
      await emitEvent(tx, from, { topic: TOPICS.debited, aggregateId: transferId, payload });
      return transfer;
    });
  }

  /** All or nothing across shards, by two-phase commit: see atomic-transfer.ts. */
  transferAtomic(fromWalletId: string, toWalletId: string, amount: bigint, key: string) {
    const shardOf = (id: string, what: string) => this.shardOf(id, what);
    const input = { fromWalletId, toWalletId, amount, key, deadlineMs: this.calls.deadlineMs, shardOf };
    return transferAtomic(this.shards, input);
  }

  /**
   * The saga, driven by the relay. Each step is one transaction on one shard, guarded by
   * `consumeOnce`, so a redelivered event changes nothing twice.
   */
  async handle(message: OutboxMessage): Promise<void> {
    switch (message.topic) {
      case TOPICS.debited: {
        const p = message.payload as TransferDebited;
        await this.inShard(p.toWalletId, async (tx) => {
          if (!(await consumeOnce(tx, p.toWalletId, "wallet.credit", message.id))) return;
          const target = await tx.wallet.findUnique({ where: { id: p.toWalletId } });
          const reason = !target
            ? `wallet ${p.toWalletId} not found`
            : target.currency !== p.currency
              ? `wallet ${p.toWalletId} holds ${target.currency}, not ${p.currency}`
              : undefined;
          if (reason) {
            const refused: TransferRefused = { transferId: p.transferId, reason };
            await emitEvent(tx, p.toWalletId, {
              topic: TOPICS.refused,
              aggregateId: p.transferId,
              payload: refused,
            });
            return;
          }
          await moveBalance(tx, p.toWalletId, p.amount, "transfer_in", p.transferId);
          const credited: TransferCredited = { transferId: p.transferId };
          await emitEvent(tx, p.toWalletId, {
            topic: TOPICS.credited,
            aggregateId: p.transferId,
            payload: credited,
          });
        });
        return;
      }
      case TOPICS.credited: {
        const p = message.payload as TransferCredited;
        await this.inShard(p.transferId, async (tx) => {
          if (!(await consumeOnce(tx, p.transferId, "wallet.complete", message.id))) return;
          await tx.transfer.update({ where: { id: p.transferId }, data: { status: "completed" } });
        });
        return;
      }
      case TOPICS.refused: {
        const p = message.payload as TransferRefused;
        await this.inShard(p.transferId, async (tx) => {
          if (!(await consumeOnce(tx, p.transferId, "wallet.refund", message.id))) return;
          const transfer = await tx.transfer.findUniqueOrThrow({ where: { id: p.transferId } });
          await moveBalance(tx, transfer.fromWalletId, transfer.amount, "refund", transfer.id);
          await tx.transfer.update({
            where: { id: transfer.id },
            data: { status: "refunded", reason: p.reason },
          });
        });
        return;
      }
      default:
        throw new Error(`wallet service: no handler for topic ${message.topic}`);
    }
  }

  async getWallet(walletId: string): Promise<{ wallet: Wallet; entries: Entry[] }> {
    this.shardOf(walletId, "wallet");
    const [wallet, entries] = await this.calls.onShard(walletId, () =>
      Promise.all([
        this.db.wallet.findUnique({ where: { id: walletId } }),
        this.db.entry.findMany({ where: { walletId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] }),
      ]),
    );
    if (!wallet) throw new WalletError("NOT_FOUND", `wallet ${walletId} not found`);
    return { wallet, entries };
  }

  /** The customer a wallet belongs to (NOT_FOUND when there is no such wallet). */
  async walletOwner(walletId: string): Promise<string> {
    this.shardOf(walletId, "wallet");
    const wallet = await this.calls.onShard(walletId, () =>
      this.db.wallet.findUnique({ where: { id: walletId }, select: { customerId: true } }),
    );
    if (!wallet) throw new WalletError("NOT_FOUND", `wallet ${walletId} not found`);
    return wallet.customerId;
  }

  async getTransfer(transferId: string): Promise<Transfer> {
    this.shardOf(transferId, "transfer");
    const transfer = await this.calls.onShard(transferId, () =>
      this.db.transfer.findUnique({ where: { id: transferId } }),
    );
    if (!transfer) throw new WalletError("NOT_FOUND", `transfer ${transferId} not found`);
    return transfer;
  }

  /**
   * Every wallet, newest first, across all shards: one query per database in parallel, merged in
   * order; `cursor` continues exactly where the previous page ended. A database that does not
   * answer makes the call fail naming its shards, never a silently short page.
   */
  async listWallets(
    limit: number,
    cursor?: string | null,
  ): Promise<{ wallets: Wallet[]; nextCursor: string | null }> {
    try {
      const page = await this.db.$scatterPage(
        "wallet",
        { orderBy: [{ createdAt: "desc" }], limit, cursor },
        { policy: "partial", deadlineMs: this.calls.deadlineMs },
      );
      if (!page.complete) {
        const missing = page.missingShards.map((s) => s.key);
        throw new WalletError(
          "SHARD_UNAVAILABLE",
          `shards ${missing.join(", ")} did not answer; retry later`,
          {
            missing,
          },
        );
      }
      return { wallets: page.rows, nextCursor: page.nextCursor };
    } catch (error) {
      if (isShardkitError(error, "INVALID_CURSOR"))
        throw new WalletError("VALIDATION", "cursor: not a cursor of this list");
      throw error;
    }
  }

  /** Where each customer and wallet lives, and the balances: for the demo and operators. */
  async census(): Promise<{ shard: string; customers: Customer[]; wallets: Wallet[] }[]> {
    const out = [];
    for (const physical of this.shards.registry.databases) {
      const customers = await physical.client.customer.findMany({ orderBy: { name: "asc" } });
      const wallets = await physical.client.wallet.findMany({ orderBy: { createdAt: "asc" } });
      out.push({ shard: physical.shards.map((s) => s.key).join(","), customers, wallets });
    }
    return out;
  }
}
