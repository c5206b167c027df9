import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { afterAll, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { S } from "../test/layout.js";
import { isShardUnavailable } from "./unavailable.js";

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

  it("looks through the cause chain", () => {
    const inner = Object.assign(new Error("refused"), { code: "ECONNREFUSED" });
    expect(isShardUnavailable(new Error("wrapped", { cause: inner }))).toBe(true);
  });
});
