import { ShardedUUID } from "@shardkit/id";
import { createOutboxRelay } from "@shardkit/prisma";
import { everyRow, httpClient } from "@shardkit/test-db";
import { inject } from "vitest";
import { buildApp } from "../app.js";
import { openShards } from "../shards.js";
import { WalletService } from "../wallet-service.js";
import { auth, operator } from "./auth.js";

/** The wallet service on the test's PostgreSQL shards, emptied, with an HTTP client over inject(). */
export async function walletWorld() {
  const shards = await openShards({ shardsJson: inject("shardsJson"), log: () => {} });
  for (const physical of shards.registry.databases) {
    await physical.client.$executeRawUnsafe(
      'TRUNCATE "Entry", "Transfer", "Wallet", "Customer", "OutboxEvent", "ProcessedEvent", "IdempotencyKey"',
    );
  }
  const service = new WalletService(shards, { deadlineMs: 3000 });
  const app = buildApp(service, { auth });
  const relay = createOutboxRelay({ registry: shards.registry, deliver: (m) => service.handle(m) });
  /** A request as `token`'s holder (default: an operator; null: no credential), under a new Idempotency-Key. */
  const http = httpClient(app, { token: operator });
  /** Runs the relay until no database has anything left to deliver. */
  async function drain(rounds = 20) {
    for (let i = 0; i < rounds; i++) {
      const report = await relay.runOnce();
      if (report.missing.length === 0 && report.databases.every((d) => d.claimed === 0)) return;
    }
    throw new Error("relay did not drain");
  }
  async function customerWithWallet(region: string, tenant: string, currency: string, deposit?: string) {
    const customer = (await http("POST", "/customers", { name: `${region}-${tenant}`, region, tenant })).body;
    const wallet = (await http("POST", `/customers/${customer.id}/wallets`, { currency })).body;
    if (deposit) await http("POST", `/wallets/${wallet.id}/deposits`, { amount: deposit });
    return { customerId: customer.id as string, walletId: wallet.id as string };
  }
  /**
   * A customer with an MXN wallet holding 10 on shard 1/1, the one on the second server: tenants
   * `<prefix>-0`, `<prefix>-1`, ... until the selector puts one there (its hash is deterministic; 20
   * at the most, so the caller checks the shard).
   */
  async function walletOnSecondServer(prefix: string) {
    let found = await customerWithWallet("MX", `${prefix}-0`, "MXN", "10");
    for (let i = 1; i < 20 && ShardedUUID.shardOf(found.walletId).key !== "1/1"; i++)
      found = await customerWithWallet("MX", `${prefix}-${i}`, "MXN", "10");
    return found;
  }
  /** POST /transfers: `amount` from one wallet to another, as an operator, under a new Idempotency-Key. */
  const transfer = (fromWalletId: string, toWalletId: string, amount: string) =>
    http("POST", "/transfers", { fromWalletId, toWalletId, amount });
  /** Every row of a table on every database. */
  const all = <T>(table: "wallet" | "entry" | "transfer" | "customer" | "outboxEvent" | "processedEvent") =>
    everyRow<T>(shards.registry, table);
  return {
    shards,
    service,
    app,
    relay,
    http,
    drain,
    customerWithWallet,
    walletOnSecondServer,
    transfer,
    all,
    async close() {
      await app.close();
      await shards.close();
    },
  };
}
