import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { afterAll, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { S } from "../test/layout.js";
import { isConnectionFailure, isShardUnavailable, isTransientTransactionError } from "./unavailable.js";

// Real errors from Prisma 7 through @prisma/adapter-pg: a passing outage, or a real refusal.
describe("isShardUnavailable", () => {
  const nowhere = new PrismaClient({
    adapter: new PrismaPg({
      connectionString: "postgresql://postgres@127.0.0.1:1/none",
      connectionTimeoutMillis: 2000,
    }),
  });
  const live = new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").a }) });
  afterAll(() => Promise.all([nowhere.$disconnect(), live.$disconnect()]));

  it("is true for a database that cannot be reached", async () => {
    const error = await nowhere.customer.count().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(isShardUnavailable(error)).toBe(true);
  });

  it("is false for what a retry cannot fix: a duplicate key, a refused query, a plain error", async () => {
    const id = ShardedId.generate("Customer", S.g0m0);
    await live.customer.create({ data: { id, name: "x", region: "x" } });
    const duplicate = await live.customer
      .create({ data: { id, name: "x", region: "x" } })
      .catch((e: unknown) => e);
    expect((duplicate as { code?: string }).code).toBe("P2002");
    expect(isShardUnavailable(duplicate)).toBe(false);
    const invalid = await live.customer
      .findFirst({ where: { name: null as never } })
      .catch((e: unknown) => e);
    expect(isShardUnavailable(invalid)).toBe(false);
    expect(isShardUnavailable(new Error("payload rejected"))).toBe(false);
    expect(isShardUnavailable(null)).toBe(false);
    await live.customer.delete({ where: { id } });
  });

  it("sees PostgreSQL's SQLSTATE inside the driver adapter error Prisma wraps (a server shutting down)", () => {
    // The shape Prisma 7.10 gives when the server of a pooled connection stops: P2039 over 57P01.
    const stopped = Object.assign(new Error("Database error. Code: `57P01`"), {
      name: "PrismaClientKnownRequestError",
      code: "P2039",
      meta: {
        driverAdapterError: Object.assign(new Error("terminating connection"), { cause: { code: "57P01" } }),
      },
    });
    expect(isShardUnavailable(stopped)).toBe(true);
    const constraint = { ...stopped, meta: { driverAdapterError: { cause: { code: "23505" } } } };
    expect(isShardUnavailable(constraint)).toBe(false);
  });

  it("tells a transaction that lost a race from one that failed", () => {
    expect(isTransientTransactionError({ code: "P2034" })).toBe(true);
    expect(isTransientTransactionError({ meta: { driverAdapterError: { cause: { code: "40P01" } } } })).toBe(
      true,
    );
    expect(
      isTransientTransactionError(new Error("Raw query failed. Code: `40001`. could not serialize access")),
    ).toBe(true);
    expect(isTransientTransactionError({ code: "P2002" })).toBe(false);
  });

  it("looks through the cause chain", () => {
    const inner = Object.assign(new Error("refused"), { code: "ECONNREFUSED" });
    expect(isShardUnavailable(new Error("wrapped", { cause: inner }))).toBe(true);
  });

  it("isConnectionFailure: the database's own connection failure only, not a step's error caused by one elsewhere, nor a wait", async () => {
    expect(isConnectionFailure(await nowhere.customer.count().catch((e: unknown) => e))).toBe(true);
    const stopped = {
      name: "PrismaClientKnownRequestError",
      code: "P2039",
      meta: { driverAdapterError: { cause: { code: "57P01" } } },
    };
    expect(isConnectionFailure(stopped)).toBe(true);
    const refused = Object.assign(new Error("refused"), { code: "ECONNREFUSED" });
    expect(isConnectionFailure(new TypeError("fetch failed", { cause: refused }))).toBe(false);
    expect(isConnectionFailure({ name: "PrismaClientKnownRequestError", code: "P2024" })).toBe(false);
    expect(isConnectionFailure({ name: "PrismaClientKnownRequestError", code: "P2028" })).toBe(false);
    expect(isConnectionFailure(new Error("payload rejected"))).toBe(false);
    expect(isConnectionFailure(undefined)).toBe(false);
  });
});
