import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import { type Customer, PrismaClient, type Wallet } from "../test/generated/prisma/client.js";
import { createShardRegistry, type ShardRegistry, type StagedWrite, shardRouting } from "./index.js";

const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: "postgresql://x/y" }) });
const registry = createShardRegistry({ shards: [{ shard: ShardIdentifier.DEFAULT, client }] });
const db = client.$extends(shardRouting({ registry, models: { Wallet: { keys: ["id", "customerId"] } } }));

describe("the routed client keeps Prisma's types", () => {
  it("model operations return the model types", () => {
    expectTypeOf(db.wallet.findUnique({ where: { id: "x" } })).resolves.toEqualTypeOf<Wallet | null>();
    expectTypeOf(db.customer.findMany({ select: { id: true } })).resolves.toEqualTypeOf<{ id: string }[]>();
  });

  it("$shard returns the registry's client type", () => {
    expectTypeOf(db.$shard("0/0")).toEqualTypeOf<PrismaClient>();
    expectTypeOf(db.$shardRegistry()).toEqualTypeOf<ShardRegistry<PrismaClient>>();
  });

  it("$transactionOn hands a typed transaction client and returns the callback's result", () => {
    const result = db.$transactionOn("0/0", async (tx) => {
      expectTypeOf<Awaited<ReturnType<typeof tx.wallet.findFirst>>>().toEqualTypeOf<Wallet | null>();
      return 42 as const;
    });
    expectTypeOf(result).resolves.toEqualTypeOf<42>();
  });

  it("$action stages typed writes on model delegates", () => {
    void db.$action((unit) => {
      const staged = unit.create("customer", { data: { id: "x", name: "n", region: "r" } });
      expectTypeOf(staged).toEqualTypeOf<StagedWrite<Customer>>();
      // @ts-expect-error not a model of the schema
      unit.create("nothing", { data: {} });
      // @ts-expect-error a Customer has no balance
      unit.create("customer", { data: { id: "x", name: "n", region: "r", balance: 1n } });
      expectTypeOf(unit.on("0/0", async (tx) => tx.setting.count())).toEqualTypeOf<StagedWrite<number>>();
    });
  });
});
