import { isShardkitError } from "@shardkit/id";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import { z } from "zod";
import type { Auth, Principal } from "./auth.js";
import { OrdersError } from "./errors.js";
import { refuseDuplicateKeys } from "./json-body.js";
import type { OrderService, Outcome } from "./order-service.js";

/** Largest amount (a unit price, a credit limit, an order's total), in minor units (10^12 cents = 10 billion). */
export const MAX_AMOUNT = 10n ** 12n;
/** Most items in one order, and most units of one item. */
export const MAX_ITEMS = 100;
export const MAX_QTY = 10_000;

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
    const issues = describeIssues(result.error.issues);
    throw new OrdersError("VALIDATION", issues.join("; "), { issues });
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
    throw new OrdersError(
      "IDEMPOTENCY_KEY_REQUIRED",
      "every change needs an Idempotency-Key header (8 to 128 letters, digits, '.', ':', '_' or '-')",
    );
  }
  const principal = request.principal;
  if (!principal) throw new OrdersError("UNAUTHENTICATED", "this route needs a credential");
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
 * The HTTP API of the orders service. Money travels as strings of minor units. Every route but
 * `/health` needs a credential (`Authorization: Bearer <token>`, see auth.ts): a customer reaches
 * only itself and its own orders; creating customers and the back office (`/admin/...`) are for
 * operators (an admin credential). Another customer's data answers 404, as if it did not exist.
 */
export function buildApp(service: OrderService, options: { auth: Auth; logger?: boolean }) {
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
    if (!principal) throw new OrdersError("UNAUTHENTICATED", "this route needs a credential");
    return principal.role === "admin" ? null : principal.customerId;
  };
  const operator = (req: FastifyRequest) => {
    if (actingAs(req) !== null) {
      throw new OrdersError("FORBIDDEN", "this route is for operators: it needs an admin credential");
    }
  };
  const customer = (req: FastifyRequest, customerId: string) => {
    const as = actingAs(req);
    if (as !== null && as !== customerId)
      throw new OrdersError("NOT_FOUND", `customer ${customerId} not found`);
  };
  /** An order, when the caller may see it (404 otherwise, as for one that does not exist). */
  const order = async (req: FastifyRequest, orderId: string) => {
    const found = await service.getOrder(orderId);
    const as = actingAs(req);
    if (as !== null && found.customerId !== as)
      throw new OrdersError("NOT_FOUND", `order ${orderId} not found`);
    return found;
  };
  // A body whose object gives a key twice is a 400 naming the key (JSON.parse would keep the last).
  refuseDuplicateKeys(app, (message) => new OrdersError("VALIDATION", message));
  // Text PostgreSQL would refuse or a client would get back altered is a 400, before any handler.
  app.addHook("preValidation", async (req) => {
    const found = badText(req.body, "body") ?? badText(req.query, "query") ?? badText(req.params, "params");
    if (found) throw new OrdersError("VALIDATION", found);
  });
  app.setReplySerializer((payload) =>
    JSON.stringify(payload, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  );

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof OrdersError) {
      if (error.status === 401) reply.header("www-authenticate", 'Bearer realm="orders"');
      return reply.code(error.status).send({ error: error.code, message: error.message, ...error.body });
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
  app.get<{ Params: { customerId: string } }>("/customers/:customerId", (req) => {
    customer(req, req.params.customerId);
    return service.getCustomer(req.params.customerId);
  });
  app.post<{ Params: { customerId: string } }>("/customers/:customerId/orders", async (req, reply) => {
    customer(req, req.params.customerId);
    const body = parse(schemas.order, req.body);
    return send(reply, 201, await service.placeOrder(req.params.customerId, body, idempotencyKey(req)));
  });
  app.get<{ Params: { customerId: string } }>("/customers/:customerId/orders", (req) => {
    customer(req, req.params.customerId);
    const query = parse(schemas.page, req.query);
    return service.listCustomerOrders(req.params.customerId, query.limit, query.cursor);
  });
  app.post<{ Params: { orderId: string } }>("/orders/:orderId/cancel", async (req, reply) => {
    parse(z.strictObject({}), req.body);
    // A customer cancels only its own orders (an operator's cancel is decided, and recorded, as is).
    if (actingAs(req) !== null) await order(req, req.params.orderId);
    return send(reply, 200, await service.cancelOrder(req.params.orderId, idempotencyKey(req)));
  });
  app.get<{ Params: { orderId: string } }>("/orders/:orderId", (req) => order(req, req.params.orderId));
  app.get("/admin/orders", (req) => {
    operator(req);
    const { limit, cursor, partial, ...filter } = parse(schemas.adminOrders, req.query);
    return service.listOrders(filter, limit, cursor, { partial: partial === "true" });
  });
  app.get("/admin/totals", (req) => {
    operator(req);
    const { partial, ...period } = parse(schemas.totals, req.query);
    return service.totals(period, { partial: partial === "true" });
  });
  return app;
}
