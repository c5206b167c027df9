import { describe, expect, it } from "vitest";
import { InvalidShardedIdError } from "./errors.js";
import { ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID } from "./sharded-uuid.js";
import { ShardedId } from "./typed-id.js";

describe("ShardedId", () => {
  const shard = ShardIdentifier.of(4, 17);

  it("generate puts the ID on the shard", () => {
    const id = ShardedId.generate("Customer", shard);
    expect(ShardedId.shardOf(id)).toBe(shard);
  });

  it("colocatedWith puts a child on its parent's shard, from an ID or a shard", () => {
    const customer = ShardedId.generate("Customer", shard);
    const wallet = ShardedId.colocatedWith("Wallet", customer);
    expect(ShardedUUID.shardOf(wallet)).toBe(shard);
    expect(wallet).not.toBe(customer);
    expect(ShardedId.shardOf(ShardedId.colocatedWith("Order", shard))).toBe(shard);
  });

  it("colocatedWith refuses an ID that does not name a shard", () => {
    expect(() => ShardedId.colocatedWith("Wallet", "0f8fad5b-d9cb-469f-a165-70867728950e")).toThrow(
      InvalidShardedIdError,
    );
  });

  it("parse validates and brands", () => {
    const raw = ShardedUUID.generate(shard);
    expect(ShardedId.parse("Wallet", raw)).toBe(raw);
    expect(() => ShardedId.parse("Wallet", "nope")).toThrow(/expected 36 characters/);
    expect(() => ShardedId.parse("Wallet", 12)).toThrow(InvalidShardedIdError);
  });
});
