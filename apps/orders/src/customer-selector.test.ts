import { ShardIdentifier } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { createCustomerSelector } from "./customer-selector.js";

describe("the customer selector", () => {
  it("a deployment with no shard of a group its rules place customers in is refused, in the deployment's terms", () => {
    expect(() => createCustomerSelector([ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)])).toThrow(
      'orders service: bad shard configuration: no shard of group 1, where customers of MX are placed (region mx). List at least one shard of each group in SHARDKIT_SHARDS, e.g. {"group":1,"member":0,"url":"postgresql://..."}',
    );
    expect(() => createCustomerSelector([ShardIdentifier.of(1, 0)])).toThrow(
      /no shard of group 0, where customers of DE, ES, FR/,
    );
    const selector = createCustomerSelector([ShardIdentifier.of(0, 0), ShardIdentifier.of(1, 3)]);
    expect(selector.select({ region: "MX", tenant: "t" })).toEqual(ShardIdentifier.of(1, 3));
    expect(selector.select({ region: "DE", tenant: "t" })).toEqual(ShardIdentifier.of(0, 0));
  });
});
