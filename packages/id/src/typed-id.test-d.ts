import { describe, expectTypeOf, it } from "vitest";
import { ShardIdentifier } from "./shard-identifier.js";
import { asId, type Id, ShardedId } from "./typed-id.js";

describe("branded IDs", () => {
  it("generate returns the model's ShardedId", () => {
    const id = ShardedId.generate("Wallet", ShardIdentifier.DEFAULT);
    expectTypeOf(id).toEqualTypeOf<ShardedId<"Wallet">>();
    expectTypeOf(ShardedId.colocatedWith("Order", id)).toEqualTypeOf<ShardedId<"Order">>();
  });

  it("a ShardedId is an Id of the same model and a string, not an Id of another model", () => {
    expectTypeOf<ShardedId<"Wallet">>().toExtend<Id<"Wallet">>();
    expectTypeOf<ShardedId<"Wallet">>().toExtend<string>();
    expectTypeOf<ShardedId<"Wallet">>().not.toExtend<Id<"Customer">>();
    expectTypeOf<Id<"Wallet">>().not.toExtend<ShardedId<"Wallet">>();
  });

  it("a plain string is not an Id", () => {
    expectTypeOf<string>().not.toExtend<Id<"Wallet">>();
    expectTypeOf(asId("Wallet", "x")).toEqualTypeOf<Id<"Wallet">>();
  });

  it("functions taking one model's ID reject another model's ID", () => {
    const getWallet = (_id: Id<"Wallet">) => undefined;
    const customer = ShardedId.generate("Customer", ShardIdentifier.DEFAULT);
    // @ts-expect-error a Customer ID is not a Wallet ID
    getWallet(customer);
    getWallet(ShardedId.generate("Wallet", ShardIdentifier.DEFAULT));
  });
});
