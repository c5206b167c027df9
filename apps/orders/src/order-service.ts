import { isShardkitError, ShardedId, ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import { emitEvent, type ScatterReport } from "@shardkit/prisma";
import type { Outcome } from "@shardkit/service-kit/calls";
import { CustomerService } from "@shardkit/service-kit/customers";
import { type CustomerProps, createCustomerSelector } from "./customer-selector.js";
import { OrdersError } from "./errors.js";
import type { Customer, Order, OrderItem } from "./generated/prisma/client.js";
import type { Shards } from "./shards.js";

/** Outbox topics. A downstream consumer (fulfilment, invoicing, a search index) would read them. */
export const TOPICS = {
  placed: "order.placed",
  cancelled: "order.cancelled",
} as const;

/** The payload of an `order.placed` event (OrderPlaced). */
export type OrderPlaced = {
  orderId: string;
  customerId: string;
  total: bigint;
  currency: string;
  items: { sku: string; qty: number; unitPrice: bigint }[];
};
/** The payload of an `order.cancelled` event (OrderCancelled). */
export type OrderCancelled = { orderId: string; customerId: string; total: bigint; currency: string };

export type { Outcome };

export type OrderView = Order & { items: OrderItem[] };

export interface NewCustomer extends CustomerProps {
  name: string;
  currency: string;
  creditLimit: bigint;
}

export interface NewOrder {
  currency: string;
  items: { sku: string; qty: number; unitPrice: bigint }[];
}

/** How a read across shards treats a database that does not answer. */
export interface AcrossShards {
  /** false (default): fail with SHARD_UNAVAILABLE naming the missing shards. true: answer without them. */
  partial?: boolean;
}

/** Whether a read across shards saw every shard, and which ones it did not. */
export interface Coverage {
  complete: boolean;
  /** Keys of the logical shards whose database did not answer (empty when complete). */
  missing: string[];
}

export interface Period {
  /** Inclusive. */
  from?: Date | undefined;
  /** Exclusive. */
  to?: Date | undefined;
}

export interface DayTotal {
  /** YYYY-MM-DD, UTC. */
  day: string;
  status: string;
  /** Totals are only added up within one currency. */
  currency: string;
  count: number;
  total: bigint;
}

/** Newest first; the ID breaks ties (IDs are UUIDv7s that carry the same instant as createdAt). */
const NEWEST_FIRST = [{ createdAt: "desc" as const }, { id: "desc" as const }];

/**
 * The orders service. A customer's orders and order items live on the customer's shard, so
 * placing an order (credit check, order, items, `order.placed` event) is one transaction there.
 * The back office reads across shards: one query per database in parallel, merged exactly, and
 * an answer that says which shards are missing, or an error, never a silently short list.
 */
export class OrderService extends CustomerService<Shards, Tx> {
  /** How a read across shards waits: a database that has not answered by `deadlineMs` counts as missing. */
  private readonly across: { policy: "partial"; deadlineMs: number };

  /**
   * `deadlineMs`: how long a call waits for its shard's database before answering 503 (default 5 s);
   * `scatterDeadlineMs`: how long a read across shards waits for each database before counting it
   * missing (default 10 s).
   */
  constructor(shards: Shards, options: { deadlineMs?: number; scatterDeadlineMs?: number } = {}) {
    super(shards, { selector: createCustomerSelector(shards.registry.shards), errors: OrdersError }, options);
    this.across = { policy: "partial", deadlineMs: options.scatterDeadlineMs ?? 10_000 };
  }

  createCustomer(input: NewCustomer, key: string): Promise<Outcome<Customer>> {
    return this.placeCustomer(input, key, (tx, id) =>
      tx.customer.create({
        data: {
          id,
          name: input.name,
          region: input.region,
          tenant: input.tenant,
          currency: input.currency,
          creditLimit: input.creditLimit,
        },
      }),
    );
  }

  async getCustomer(customerId: string): Promise<Customer> {
    const shard = this.shardOf(customerId, "customer");
    const customer = await this.calls.onShard(shard, () =>
      this.db.customer.findUnique({ where: { id: customerId } }),
    );
    if (!customer) throw new OrdersError("NOT_FOUND", `customer ${customerId} not found`);
    return customer;
  }

  /**
   * Places an order: in one transaction on the customer's shard, lock the customer row, check
   * that its open orders plus this one stay within its credit limit, write the order, its items
   * and an `order.placed` event. Concurrent placements for one customer queue on the lock, so
   * they cannot overshoot the limit together.
   */
  placeOrder(customerId: string, input: NewOrder, key: string): Promise<Outcome<OrderView>> {
    const shard = this.shardOf(customerId, "customer");
    const total = input.items.reduce((sum, item) => sum + BigInt(item.qty) * item.unitPrice, 0n);
    return this.calls.command(shard, "order", key, { customerId, ...input }, async (tx) => {
      const [customer] = await tx.$queryRawUnsafe<{ currency: string; creditLimit: string }[]>(
        `SELECT currency, "creditLimit"::text AS "creditLimit" FROM "Customer" WHERE id = $1::uuid FOR UPDATE`,
        customerId,
      );
      if (!customer) throw new OrdersError("NOT_FOUND", `customer ${customerId} not found`);
      if (customer.currency !== input.currency) {
        throw new OrdersError(
          "CURRENCY_MISMATCH",
          `customer ${customerId} orders in ${customer.currency}, not ${input.currency}`,
        );
      }
      const limit = BigInt(customer.creditLimit);
      const open = await tx.order.aggregate({
        where: { customerId, status: "placed" },
        _sum: { total: true },
      });
      const used = open._sum.total ?? 0n;
      if (used + total > limit) {
        throw new OrdersError(
          "CREDIT_LIMIT_EXCEEDED",
          `customer ${customerId} has ${used} of ${limit} in open orders; this order needs ${total}`,
        );
      }
      const id = ShardedId.colocatedWith("Order", customerId);
      const createdAt = new Date(ShardedUUID.timestampOf(id));
      const order = await tx.order.create({
        data: {
          id,
          customerId,
          status: "placed",
          total,
          currency: input.currency,
          createdAt,
          placedDay: dayOf(createdAt),
          items: {
            create: input.items.map((item) => ({
              id: ShardedId.colocatedWith("OrderItem", id),
              sku: item.sku,
              qty: item.qty,
              unitPrice: item.unitPrice,
            })),
          },
        },
        include: { items: { orderBy: { id: "asc" } } },
      });
      const payload: OrderPlaced = {
        orderId: id,
        customerId,
        total,
        currency: input.currency,
        items: input.items,
      };
      await emitEvent(tx, shard, { topic: TOPICS.placed, aggregateId: id, payload });
      return order;
    });
  }

  /** Cancels a placed order (its total no longer counts against the limit) and writes `order.cancelled`. */
  cancelOrder(orderId: string, key: string): Promise<Outcome<OrderView>> {
    const shard = this.shardOf(orderId, "order");
    return this.calls.command(shard, "cancel", key, { orderId }, async (tx) => {
      const { count } = await tx.order.updateMany({
        where: { id: orderId, status: "placed" },
        data: { status: "cancelled", cancelledAt: new Date() },
      });
      const order = await tx.order.findUnique({
        where: { id: orderId },
        include: { items: { orderBy: { id: "asc" } } },
      });
      if (!order) throw new OrdersError("NOT_FOUND", `order ${orderId} not found`);
      if (count === 0) throw new OrdersError("ORDER_NOT_OPEN", `order ${orderId} is ${order.status}`);
      const payload: OrderCancelled = {
        orderId,
        customerId: order.customerId,
        total: order.total,
        currency: order.currency,
      };
      await emitEvent(tx, shard, { topic: TOPICS.cancelled, aggregateId: orderId, payload });
      return order;
    });
  }

  async getOrder(orderId: string): Promise<OrderView> {
    const shard = this.shardOf(orderId, "order");
    const order = await this.calls.onShard(shard, () =>
      this.db.order.findUnique({ where: { id: orderId }, include: { items: { orderBy: { id: "asc" } } } }),
    );
    if (!order) throw new OrdersError("NOT_FOUND", `order ${orderId} not found`);
    return order;
  }

  /** One customer's orders, newest first: one query on the customer's shard, keyset pagination. */
  async listCustomerOrders(
    customerId: string,
    limit: number,
    cursor?: string | null,
  ): Promise<{ orders: Order[]; nextCursor: string | null }> {
    const customer = await this.getCustomer(customerId);
    const page = await this.calls.onShard(ShardedUUID.shardOf(customer.id), () =>
      validCursor(() =>
        this.db.$scatterPage("order", { where: { customerId }, orderBy: NEWEST_FIRST, limit, cursor }),
      ),
    );
    return { orders: page.rows, nextCursor: page.nextCursor };
  }

  /**
   * Every order of every customer, newest first, optionally by status and period: one query per
   * database in parallel, merged in order; `nextCursor` continues exactly where the page ended.
   * A database that does not answer fails the call naming its shards, or with `partial` is left
   * out and named in `missing` (and the page has no `nextCursor`: a cursor from a partial page
   * would skip the missing shards' rows for good).
   */
  async listOrders(
    filter: { status?: string | undefined } & Period,
    limit: number,
    cursor?: string | null,
    options: AcrossShards = {},
  ): Promise<{ orders: Order[]; nextCursor: string | null } & Coverage> {
    const where = { ...(filter.status ? { status: filter.status } : {}), ...periodWhere(filter) };
    const page = await validCursor(() =>
      this.db.$scatterPage("order", { where, orderBy: NEWEST_FIRST, limit, cursor }, this.across),
    );
    const coverage = covered(page, options);
    return { orders: page.rows, nextCursor: page.nextCursor, ...coverage };
  }

  /**
   * Count and sum of order totals per day (UTC), status and currency, over every shard: each
   * database groups its own rows, and the groups are merged (counts and sums add).
   */
  async totals(period: Period, options: AcrossShards = {}): Promise<{ totals: DayTotal[] } & Coverage> {
    let report: ScatterReport | undefined;
    const groups = await this.db.$scatter({ ...this.across, onReport: (r) => (report = r) }).order.groupBy({
      by: ["placedDay", "status", "currency"],
      where: periodWhere(period),
      _count: true,
      _sum: { total: true },
    });
    const coverage = covered(
      { complete: report?.complete ?? true, missingShards: report?.missingShards ?? [] },
      options,
    );
    const totals = groups.map((row) => ({
      day: row.placedDay.toISOString().slice(0, 10),
      status: row.status,
      currency: row.currency,
      count: row._count,
      total: row._sum.total ?? 0n,
    }));
    return { totals, ...coverage };
  }

  /** Where each customer and order lives: for the demo and operators. */
  async census(): Promise<{ shard: string; customers: Customer[]; orders: Order[] }[]> {
    const out = [];
    for (const physical of this.shards.registry.databases) {
      const customers = await physical.client.customer.findMany({ orderBy: { name: "asc" } });
      const orders = await physical.client.order.findMany({ orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      out.push({ shard: physical.shards.map((s) => s.key).join(","), customers, orders });
    }
    return out;
  }
}

/** The coverage of an answer across shards, or 503 SHARD_UNAVAILABLE naming the missing shards unless `partial`. */
function covered(
  answer: { complete: boolean; missingShards: readonly ShardIdentifier[] },
  options: AcrossShards,
): Coverage {
  const missing = answer.missingShards.map((s) => s.key);
  if (!answer.complete && !options.partial) {
    throw new OrdersError(
      "SHARD_UNAVAILABLE",
      `shards ${missing.join(", ")} did not answer, so the answer would be incomplete; retry later, or ask for partial=true`,
      { missing },
    );
  }
  return { complete: answer.complete, missing };
}

/** A cursor the library refuses (tampered, or made for another list) is the client's mistake: 400. */
async function validCursor<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (isShardkitError(error, "INVALID_CURSOR"))
      throw new OrdersError("VALIDATION", "cursor: not a cursor of this list");
    throw error;
  }
}

function periodWhere(period: Period) {
  if (!period.from && !period.to) return {};
  return {
    createdAt: { ...(period.from ? { gte: period.from } : {}), ...(period.to ? { lt: period.to } : {}) },
  };
}

/** The UTC day of an instant, as a DATE value. */
function dayOf(instant: Date): Date {
  return new Date(Date.UTC(instant.getUTCFullYear(), instant.getUTCMonth(), instant.getUTCDate()));
}

type Tx = Parameters<Parameters<Shards["db"]["$transactionOn"]>[1]>[0];
