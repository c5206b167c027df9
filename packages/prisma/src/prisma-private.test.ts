import { PrismaPg } from "@prisma/adapter-pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { SCHEMA_MODELS } from "../test/layout.js";
import { dataModelOf, isPrismaValidationError } from "./prisma-private.js";

// The private Prisma fields shardkit depends on, checked against a real Prisma 7 client.
describe("Prisma's private fields shardkit reads", () => {
  const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").a }) });
  afterAll(() => client.$disconnect());

  it("_runtimeDataModel lists models, scalar keys and relations", () => {
    const model = dataModelOf(client);
    expect(Object.keys(model.models).sort()).toEqual(SCHEMA_MODELS);
    expect(model.models.Wallet?.fields.customerId).toEqual({ kind: "scalar", type: "String" });
    expect(model.models.Customer?.fields.wallets).toEqual({ kind: "object", type: "Wallet" });
    expect(() => dataModelOf({})).toThrow(/runtime data model/);
  });

  it("a query Prisma refuses before it reaches the database is a PrismaClientValidationError", async () => {
    // The scatter planner learns whether a field is nullable from this (the data model does not say).
    const refused = await client.customer
      .findFirst({ where: { AND: [{ name: null as unknown as string }, { id: { in: [] } }] } })
      .catch((error: unknown) => error);
    expect(isPrismaValidationError(refused)).toBe(true);
    const accepted = await client.wallet.findFirst({ where: { AND: [{ label: null }, { id: { in: [] } }] } });
    expect(accepted).toBeNull();
    expect(isPrismaValidationError(new Error("x"))).toBe(false);
  });
});
