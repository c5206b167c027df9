import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID } from "./sharded-uuid.js";
import type { Id, ShardedId } from "./typed-id.js";
import { zId, zShardedId } from "./zod.js";

describe("zod schemas", () => {
  const body = z.object({ walletId: zShardedId("Wallet"), customerId: zId("Customer") });

  it("accept valid IDs and type them", () => {
    const walletId = ShardedUUID.generate(ShardIdentifier.of(1, 2));
    const parsed = body.parse({ walletId, customerId: "0F8FAD5B-D9CB-469F-A165-70867728950E" });
    expect(parsed.walletId).toBe(walletId);
    expectTypeOf(parsed.walletId).toEqualTypeOf<ShardedId<"Wallet">>();
    expectTypeOf(parsed.customerId).toEqualTypeOf<Id<"Customer">>();
  });

  it("give readable errors that name the model and the path", () => {
    const result = body.safeParse({ walletId: "0f8fad5b-d9cb-469f-a165-70867728950e", customerId: 7 });
    expect(result.success).toBe(false);
    const issues = result.error!.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    expect(issues).toEqual([
      'walletId: Expected a Wallet ID (lowercase UUID version 7), got "0f8fad5b-d9cb-469f-a165-70867728950e"',
      "customerId: Expected a Customer ID (string)",
    ]);
  });
});
