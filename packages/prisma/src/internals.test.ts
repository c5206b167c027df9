import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { afterAll, describe, expect, inject, it } from "vitest";
import { Prisma, PrismaClient } from "../test/generated/prisma/client.js";
import { dataModelOf } from "./data-model.js";
import { prismaCallInfo, unpackFluent } from "./internals.js";

// The private Prisma fields shardkit depends on, checked against a real Prisma 7 client.
describe("Prisma internals shardkit reads", () => {
  const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").a }) });
  afterAll(() => client.$disconnect());

  it("_runtimeDataModel lists models, scalar keys and relations", () => {
    const model = dataModelOf(client);
    expect(Object.keys(model.models).sort()).toEqual([
      "Customer",
      "IdempotencyKey",
      "Order",
      "OrderItem",
      "OutboxEvent",
      "ProcessedEvent",
      "Setting",
      "Wallet",
    ]);
    expect(model.models.Wallet?.fields.customerId).toEqual({ kind: "scalar", type: "String" });
    expect(model.models.Customer?.fields.wallets).toEqual({ kind: "object", type: "Wallet" });
    expect(() => dataModelOf({})).toThrow(/runtime data model/);
  });

  it("__internalParams: transaction marker and fluent data path", async () => {
    const seen: ReturnType<typeof prismaCallInfo>[] = [];
    const probe = client.$extends(
      Prisma.defineExtension({
        query: {
          $allModels: {
            async $allOperations(params) {
              seen.push(prismaCallInfo(params));
              return params.query(params.args);
            },
          },
        },
      }),
    );
    const id = ShardedId.generate("Customer", ShardIdentifier.DEFAULT);
    await probe.customer.findUnique({ where: { id } });
    await probe.customer.findUnique({ where: { id } }).wallets();
    await probe.$transaction(async (tx) => tx.customer.findUnique({ where: { id } }));
    expect(seen).toEqual([
      { inTransaction: false, fluentPath: [] },
      { inTransaction: false, fluentPath: ["wallets"] },
      { inTransaction: true, fluentPath: [] },
    ]);
  });

  it("unpackFluent walks the path and maps a missing parent to null", () => {
    expect(unpackFluent({ wallets: [1] }, ["wallets"])).toEqual([1]);
    expect(unpackFluent(null, ["wallets"])).toBeNull();
    expect(unpackFluent({ order: { customer: { id: "x" } } }, ["order", "customer"])).toEqual({ id: "x" });
  });
});
