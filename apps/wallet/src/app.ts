import { isShardkitError } from "@shardkit/id";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { z } from "zod";
import type { Auth, Principal } from "./auth.js";
import { WalletError } from "./errors.js";
import { refuseDuplicateKeys } from "./json-body.js";
import type { Outcome, WalletService } from "./wallet-service.js";

/** Largest amount one call may move, in minor units (10^12 cents = 10 billion). */
export const MAX_AMOUNT = 10n ** 12n;

const AMOUNT =
  "must be a positive integer number of minor units (e.g. 1250 for 12.50), as a number or a string";
const amount = z
  .union([z.string(), z.number()], { error: AMOUNT })
  .transform((value, ctx) => {
    const integer =
      typeof value === "number" ? Number.isSafeInteger(value) && value >= 0 : /^\d{1,19}$/.test(value);
    if (!integer) {
      ctx.addIssue({ code: "custom", message: AMOUNT });
      return z.NEVER;
    }
    return BigInt(value);
  })
  .refine((value) => value > 0n, { error: "must be greater than 0" })
  .refine((value) => value <= MAX_AMOUNT, { error: `must be at most ${MAX_AMOUNT} minor units` });

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

/** At most this many problems, each at most 200 characters, reach an error response: it stays small whatever the input. */
const MAX_ISSUES = 10;
function describeIssues(issues: readonly { path: PropertyKey[]; message: string }[]): string[] {
  const clip = (text: string) => (text.length > 200 ? `${text.slice(0, 197)}...` : text);
  const list = issues
    .slice(0, MAX_ISSUES)
    .map((i) => clip(`${i.path.map(String).join(".") || "body"}: ${i.message}`));
  if (issues.length > MAX_ISSUES) list.push(`and ${issues.length - MAX_ISSUES} more`);
  return list;
}

/**
 * The first string in a request (body, query, params) that PostgreSQL would refuse (a NUL
 * character) or a client would get back altered (a lone UTF-16 surrogate), with its path.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function badText(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === "string") {
    if (value.includes("\0")) return `${path}: must not contain NUL characters`;
    if (LONE_SURROGATE.test(value)) return `${path}: must not contain lone surrogates (not valid Unicode)`;
    return undefined;
  }
  if (value === null || typeof value !== "object" || depth > 20) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = badText(key, path, depth + 1) ?? badText(inner, `${path}.${key}`, depth + 1);
    if (found) return found;
  }
  return undefined;
}

function parse<T>(schema: z.ZodType<T, unknown>, value: unknown): T {
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    throw new WalletError("VALIDATION", describeIssues(result.error.issues).join("; "));
  }
  return result.data;
}

/**
 * The request's Idempotency-Key, in its caller's own namespace: a key one caller sent never meets
 * another's (no 409 that says another customer used it, no key taken ahead of its owner).
 */
function idempotencyKey(request: FastifyRequest): string {
  const key = request.headers["idempotency-key"];
  if (typeof key !== "string" || !/^[\w.:-]{8,128}$/.test(key)) {
    throw new WalletError(
      "IDEMPOTENCY_KEY_REQUIRED",
      "every change needs an Idempotency-Key header (8 to 128 letters, digits, '.', ':', '_' or '-')",
    );
  }
  const principal = request.principal;
  if (!principal) throw new WalletError("UNAUTHENTICATED", "this route needs a credential");
  return `${principal.role === "admin" ? `admin:${principal.subject}` : `customer:${principal.customerId}`}/${key}`;
}

function send<T>(reply: FastifyReply, status: number, outcome: Outcome<T>) {
  if (outcome.replayed) reply.header("idempotent-replayed", "true");
  return reply.code(status).send(outcome.result);
}

declare module "fastify" {
  interface FastifyRequest {
    /** The caller, from the request's credential (null only on /health, which needs none). */
    principal: Principal | null;
  }
}

/** Routes a load balancer calls without a credential. */
const OPEN = new Set(["/health"]);

/**
 * The HTTP API of the wallet service. Money travels as strings of minor units. Every route but
 * `/health` needs a credential (`Authorization: Bearer <token>`, see auth.ts): a customer reaches
 * only its own wallets and the transfers it made; customers and the list of every wallet are for
 * operators (an admin credential). Another customer's wallet answers 404, as one that does not exist.
 */
export function buildApp(service: WalletService, options: { auth: Auth; logger?: boolean }) {
  const { auth } = options;
  const app = Fastify({ logger: options.logger ?? false });
  app.decorateRequest("principal", null);
  app.addHook("onRequest", async (req) => {
    if (OPEN.has(req.routeOptions.url ?? "")) return;
    req.principal = await auth.verify(req.headers.authorization);
  });
  /** The customer the caller acts as, or null for an operator (who may act on any). */
  const actingAs = (req: FastifyRequest): string | null => {
    const principal = req.principal;
    if (!principal) throw new WalletError("UNAUTHENTICATED", "this route needs a credential");
    return principal.role === "admin" ? null : principal.customerId;
  };
  const operator = (req: FastifyRequest) => {
    if (actingAs(req) !== null) {
      throw new WalletError("FORBIDDEN", "this route is for operators: it needs an admin credential");
    }
  };
  const customer = (req: FastifyRequest, customerId: string) => {
    const as = actingAs(req);
    if (as !== null && as !== customerId)
      throw new WalletError("NOT_FOUND", `customer ${customerId} not found`);
  };
  const wallet = async (req: FastifyRequest, walletId: string) => {
    const as = actingAs(req);
    if (as !== null && (await service.walletOwner(walletId)) !== as) {
      throw new WalletError("NOT_FOUND", `wallet ${walletId} not found`);
    }
  };
  // A body whose object gives a key twice is a 400 naming the key (JSON.parse would keep the last).
  refuseDuplicateKeys(app, (message) => new WalletError("VALIDATION", message));
  // Text PostgreSQL would refuse or a client would get back altered is a 400, before any handler.
  app.addHook("preValidation", async (req) => {
    const found = badText(req.body, "body") ?? badText(req.query, "query") ?? badText(req.params, "params");
    if (found) throw new WalletError("VALIDATION", found);
  });
  app.setReplySerializer((payload) =>
    JSON.stringify(payload, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  );

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof WalletError) {
      if (error.status === 503) reply.header("retry-after", "1");
      if (error.status === 401) reply.header("www-authenticate", 'Bearer realm="wallet"');
      return reply.code(error.status).send({ ...error.body, error: error.code, message: error.message });
    }
    if (isShardkitError(error, "INVALID_SHARDED_ID")) {
      return reply.code(400).send({ error: "VALIDATION", message: error.message });
    }
    const fastifyStatus = (error as { statusCode?: number }).statusCode;
    if (typeof fastifyStatus === "number" && fastifyStatus >= 400 && fastifyStatus < 500) {
      return reply.code(fastifyStatus).send({ error: "VALIDATION", message: (error as Error).message });
    }
    request.log.error(error);
    return reply.code(500).send({ error: "INTERNAL", message: "internal error" });
  });

  // Each shard's state, for load balancers and people: 200 while any shard is up (a shard that is
  // down fails only its own requests), 503 when none is.
  app.get("/health", async (_req, reply) => {
    const report = await service.health();
    return reply.code(report.status === "down" ? 503 : 200).send(report);
  });
  app.post("/customers", async (req, reply) => {
    operator(req);
    const body = parse(schemas.customer, req.body);
    return send(reply, 201, await service.createCustomer(body, idempotencyKey(req)));
  });
  app.post<{ Params: { customerId: string } }>("/customers/:customerId/wallets", async (req, reply) => {
    customer(req, req.params.customerId);
    const { currency } = parse(schemas.wallet, req.body);
    return send(reply, 201, await service.openWallet(req.params.customerId, currency, idempotencyKey(req)));
  });
  app.post<{ Params: { walletId: string } }>("/wallets/:walletId/deposits", async (req, reply) => {
    const { amount } = parse(schemas.money, req.body);
    await wallet(req, req.params.walletId);
    return send(reply, 200, await service.deposit(req.params.walletId, amount, idempotencyKey(req)));
  });
  app.post<{ Params: { walletId: string } }>("/wallets/:walletId/withdrawals", async (req, reply) => {
    const { amount } = parse(schemas.money, req.body);
    await wallet(req, req.params.walletId);
    return send(reply, 200, await service.withdraw(req.params.walletId, amount, idempotencyKey(req)));
  });
  app.post("/transfers", async (req, reply) => {
    const body = parse(schemas.transfer, req.body);
    await wallet(req, body.fromWalletId);
    const outcome = await service.transfer(
      body.fromWalletId,
      body.toWalletId,
      body.amount,
      idempotencyKey(req),
    );
    // 201: done (same shard); 202: accepted, the saga finishes it (GET /transfers/:id).
    return send(reply, outcome.result.status === "pending" ? 202 : 201, outcome);
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
    const query = parse(schemas.list, req.query);
    return service.listWallets(query.limit, query.cursor);
  });
  return app;
}
