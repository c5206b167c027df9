import { parseInput, replyOutcome } from "@shardkit/prisma/fastify";
import { minorUnits, serviceApp } from "@shardkit/service-kit/http";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { type Auth, ROLES } from "./auth.js";
import { WalletError } from "./errors.js";
import type { WalletService } from "./wallet-service.js";

/** Largest amount one call may move, in minor units (10^12 cents = 10 billion). */
export const MAX_AMOUNT = 10n ** 12n;

const amount = minorUnits(MAX_AMOUNT);

const id = z.string({ error: "must be an ID" }).min(1, { error: "must be an ID" });
const schemas = {
  customer: z.strictObject({
    name: z.string().trim().min(1).max(200),
    region: z.string().regex(/^[A-Z]{2}$/, { error: "must be an ISO 3166 country code such as MX or DE" }),
    tenant: z.string().trim().min(1).max(100),
  }),
  wallet: z.strictObject({
    currency: z.string().regex(/^[A-Z]{3}$/, { error: "must be an ISO 4217 code such as EUR" }),
  }),
  money: z.strictObject({ amount }),
  transfer: z.strictObject({ fromWalletId: id, toWalletId: id, amount }),
  list: z.strictObject({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    cursor: z.string().optional(),
  }),
};

/**
 * The HTTP API of the wallet service. Money travels as strings of minor units. Every route but
 * `/health` needs a credential (`Authorization: Bearer <token>`, see auth.ts): a customer reaches
 * only its own wallets and the transfers it made; customers and the list of every wallet are for
 * operators (an admin credential). Another customer's wallet answers 404, as one that does not exist.
 */
export function buildApp(service: WalletService, options: { auth: Auth; logger?: boolean }) {
  const { app, access } = serviceApp({
    ...options,
    roles: ROLES,
    errors: WalletError,
    realm: "wallet",
    health: service,
  });
  const { actingAs, operator, idempotencyKey } = access;
  const customer = (req: FastifyRequest, customerId: string) => access.self(req, customerId, "customer");
  const wallet = async (req: FastifyRequest, walletId: string) => {
    const as = actingAs(req);
    if (as !== null && (await service.walletOwner(walletId)) !== as) {
      throw new WalletError("NOT_FOUND", `wallet ${walletId} not found`);
    }
  };
  app.post("/customers", async (req, reply) => {
    operator(req);
    const body = parseInput(schemas.customer, req.body);
    return replyOutcome(reply, 201, await service.createCustomer(body, idempotencyKey(req)));
  });
  app.post<{ Params: { customerId: string } }>("/customers/:customerId/wallets", async (req, reply) => {
    customer(req, req.params.customerId);
    const { currency } = parseInput(schemas.wallet, req.body);
    return replyOutcome(
      reply,
      201,
      await service.openWallet(req.params.customerId, currency, idempotencyKey(req)),
    );
  });
  app.post<{ Params: { walletId: string } }>("/wallets/:walletId/deposits", async (req, reply) => {
    const { amount } = parseInput(schemas.money, req.body);
    await wallet(req, req.params.walletId);
    return replyOutcome(reply, 200, await service.deposit(req.params.walletId, amount, idempotencyKey(req)));
  });
  app.post<{ Params: { walletId: string } }>("/wallets/:walletId/withdrawals", async (req, reply) => {
    const { amount } = parseInput(schemas.money, req.body);
    await wallet(req, req.params.walletId);
    return replyOutcome(reply, 200, await service.withdraw(req.params.walletId, amount, idempotencyKey(req)));
  });
  app.post("/transfers", async (req, reply) => {
    const body = parseInput(schemas.transfer, req.body);
    await wallet(req, body.fromWalletId);
    const outcome = await service.transfer(
      body.fromWalletId,
      body.toWalletId,
      body.amount,
      idempotencyKey(req),
    );
    // 201: done (same shard); 202: accepted, the saga finishes it (GET /transfers/:id).
    return replyOutcome(reply, outcome.result.status === "pending" ? 202 : 201, outcome);
  });
  // All or nothing across shards (two-phase commit; atomic-transfer.ts): 201 with the completed transfer.
  app.post("/transfers/atomic", async (req, reply) => {
    const { fromWalletId, toWalletId, amount } = parseInput(schemas.transfer, req.body);
    await wallet(req, fromWalletId);
    const key = idempotencyKey(req);
    return replyOutcome(reply, 201, await service.transferAtomic(fromWalletId, toWalletId, amount, key));
  });
  app.get<{ Params: { transferId: string } }>("/transfers/:transferId", async (req) => {
    const transfer = await service.getTransfer(req.params.transferId);
    // A customer reads the transfers it made (the receiver sees the credit on its own wallet).
    const as = actingAs(req);
    if (as !== null && (await service.walletOwner(transfer.fromWalletId)) !== as) {
      throw new WalletError("NOT_FOUND", `transfer ${req.params.transferId} not found`);
    }
    return transfer;
  });
  app.get<{ Params: { walletId: string } }>("/wallets/:walletId", async (req) => {
    await wallet(req, req.params.walletId);
    return service.getWallet(req.params.walletId);
  });
  app.get("/admin/wallets", (req) => {
    operator(req);
    const query = parseInput(schemas.list, req.query);
    return service.listWallets(query.limit, query.cursor);
  });
  return app;
}
