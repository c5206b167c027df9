import { parseInput, replyOutcome } from "@shardkit/prisma/fastify";
import { minorUnits, serviceApp } from "@shardkit/service-kit/http";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { type Auth, ROLES } from "./auth.js";
import { OrdersError } from "./errors.js";
import type { OrderService } from "./order-service.js";

/** Largest amount (a unit price, a credit limit, an order's total), in minor units (10^12 cents = 10 billion). */
export const MAX_AMOUNT = 10n ** 12n;
/** Most items in one order, and most units of one item. */
export const MAX_ITEMS = 100;
export const MAX_QTY = 10_000;

const amount = minorUnits(MAX_AMOUNT);

const QTY = `must be a whole number from 1 to ${MAX_QTY}`;
const currency = z.string({ error: "must be an ISO 4217 code such as EUR" }).regex(/^[A-Z]{3}$/, {
  error: "must be an ISO 4217 code such as EUR",
});

const INSTANT = "must be a date (2026-11-30) or a timestamp with a zone (2026-11-30T12:00:00Z)";
/** A date (midnight UTC) or an ISO 8601 timestamp with a zone. */
const instant = z.string({ error: INSTANT }).transform((value, ctx) => {
  const date = /^\d{4}-\d{2}-\d{2}$/.test(value);
  const timestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(value);
  const parsed = new Date(date ? `${value}T00:00:00Z` : value);
  if (
    !(date || timestamp) ||
    Number.isNaN(parsed.getTime()) ||
    (date && !parsed.toISOString().startsWith(value))
  ) {
    ctx.addIssue({ code: "custom", message: INSTANT });
    return z.NEVER;
  }
  if (parsed.getUTCFullYear() < 1) {
    // PostgreSQL goes further back, but Prisma sends dates as ISO 8601 text, which it accepts from year 1.
    ctx.addIssue({ code: "custom", message: "must be in year 1 or later" });
    return z.NEVER;
  }
  return parsed;
});
const period = {
  from: instant.optional(),
  to: instant.optional(),
  partial: z.enum(["true", "false"], { error: "must be true or false" }).optional(),
};
const laterThanFrom = (q: { from?: Date | undefined; to?: Date | undefined }) =>
  !q.from || !q.to || q.to > q.from;

const item = z.strictObject({
  sku: z
    .string({ error: "must be a SKU" })
    .regex(/^[A-Za-z0-9][\w.-]{0,63}$/, { error: "must be 1 to 64 letters, digits, '.', '_' or '-'" }),
  qty: z.number({ error: QTY }).int({ error: QTY }).min(1, { error: QTY }).max(MAX_QTY, { error: QTY }),
  unitPrice: amount,
});

const schemas = {
  customer: z.strictObject({
    name: z.string().trim().min(1).max(200),
    region: z.string().regex(/^[A-Z]{2}$/, { error: "must be an ISO 3166 country code such as MX or DE" }),
    tenant: z.string().trim().min(1).max(100),
    currency,
    creditLimit: amount,
  }),
  order: z
    .strictObject({
      currency,
      items: z
        .array(item, { error: "must be a list of { sku, qty, unitPrice }" })
        .min(1, { error: "must hold at least one item" })
        .max(MAX_ITEMS, { error: `must hold at most ${MAX_ITEMS} items` }),
    })
    .superRefine((order, ctx) => {
      const seen = new Set<string>();
      order.items.forEach((it, i) => {
        if (seen.has(it.sku))
          ctx.addIssue({ code: "custom", path: ["items", i, "sku"], message: `${it.sku} is listed twice` });
        seen.add(it.sku);
      });
      const total = order.items.reduce((sum, it) => sum + BigInt(it.qty) * it.unitPrice, 0n);
      if (total > MAX_AMOUNT) {
        ctx.addIssue({
          code: "custom",
          path: ["items"],
          message: `the order's total (qty * unitPrice over the items) must be at most ${MAX_AMOUNT} minor units`,
        });
      }
    }),
  page: z.strictObject({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    cursor: z.string().optional(),
  }),
  adminOrders: z
    .strictObject({
      status: z.enum(["placed", "cancelled"], { error: "must be placed or cancelled" }).optional(),
      limit: z.coerce.number().int().min(1).max(200).default(50),
      cursor: z.string().optional(),
      ...period,
    })
    .refine(laterThanFrom, { error: "must be later than from", path: ["to"] }),
  totals: z.strictObject(period).refine(laterThanFrom, { error: "must be later than from", path: ["to"] }),
};

/**
 * The HTTP API of the orders service. Money travels as strings of minor units. Every route but
 * `/health` needs a credential (`Authorization: Bearer <token>`, see auth.ts): a customer reaches
 * only itself and its own orders; creating customers and the back office (`/admin/...`) are for
 * operators (an admin credential). Another customer's data answers 404, as if it did not exist.
 */
export function buildApp(service: OrderService, options: { auth: Auth; logger?: boolean }) {
  const { app, access } = serviceApp({
    ...options,
    roles: ROLES,
    errors: OrdersError,
    realm: "orders",
    health: service,
  });
  const { actingAs, operator, idempotencyKey } = access;
  const customer = (req: FastifyRequest, customerId: string) => access.self(req, customerId, "customer");
  /** An order, when the caller may see it (404 otherwise, as for one that does not exist). */
  const order = async (req: FastifyRequest, orderId: string) => {
    const found = await service.getOrder(orderId);
    const as = actingAs(req);
    if (as !== null && found.customerId !== as)
      throw new OrdersError("NOT_FOUND", `order ${orderId} not found`);
    return found;
  };
  app.post("/customers", async (req, reply) => {
    operator(req);
    const body = parseInput(schemas.customer, req.body);
    return replyOutcome(reply, 201, await service.createCustomer(body, idempotencyKey(req)));
  });
  app.get<{ Params: { customerId: string } }>("/customers/:customerId", (req) => {
    customer(req, req.params.customerId);
    return service.getCustomer(req.params.customerId);
  });
  app.post<{ Params: { customerId: string } }>("/customers/:customerId/orders", async (req, reply) => {
    customer(req, req.params.customerId);
    const body = parseInput(schemas.order, req.body);
    return replyOutcome(
      reply,
      201,
      await service.placeOrder(req.params.customerId, body, idempotencyKey(req)),
    );
  });
  app.get<{ Params: { customerId: string } }>("/customers/:customerId/orders", (req) => {
    customer(req, req.params.customerId);
    const query = parseInput(schemas.page, req.query);
    return service.listCustomerOrders(req.params.customerId, query.limit, query.cursor);
  });
  app.post<{ Params: { orderId: string } }>("/orders/:orderId/cancel", async (req, reply) => {
    parseInput(z.strictObject({}), req.body);
    // A customer cancels only its own orders (an operator's cancel is decided, and recorded, as is).
    if (actingAs(req) !== null) await order(req, req.params.orderId);
    return replyOutcome(reply, 200, await service.cancelOrder(req.params.orderId, idempotencyKey(req)));
  });
  app.get<{ Params: { orderId: string } }>("/orders/:orderId", (req) => order(req, req.params.orderId));
  app.get("/admin/orders", (req) => {
    operator(req);
    const { limit, cursor, partial, ...filter } = parseInput(schemas.adminOrders, req.query);
    return service.listOrders(filter, limit, cursor, { partial: partial === "true" });
  });
  app.get("/admin/totals", (req) => {
    operator(req);
    const { partial, ...period } = parseInput(schemas.totals, req.query);
    return service.totals(period, { partial: partial === "true" });
  });
  return app;
}
