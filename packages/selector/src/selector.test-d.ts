import type { ShardIdentifier } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import { NoGroupMatchError, type SelectorError, type SelectorErrorCode } from "./errors.js";
import type { ShardSelectorConfig } from "./index.js";
import { createShardSelector, type SelectionExplanation, type ShardSelector } from "./index.js";

interface Customer {
  tenantId: string;
  region: "MX" | "US" | "DE";
  regulatoryClass?: "bank" | "fintech";
}

describe("types", () => {
  it("select returns a ShardIdentifier, explain a SelectionExplanation", () => {
    const s = createShardSelector({
      routingKey: "tenantId",
      groups: [{ group: 0, members: [0] }],
      defaultGroup: 0,
    });
    expectTypeOf(s).toEqualTypeOf<ShardSelector<Record<string, unknown>>>();
    expectTypeOf(s.select({ tenantId: "t" })).toEqualTypeOf<ShardIdentifier>();
    expectTypeOf(s.explain({ tenantId: "t" })).toEqualTypeOf<SelectionExplanation>();
  });

  it("with a row type, routingKey, rule properties and select's argument are checked", () => {
    const s = createShardSelector<Customer>({
      routingKey: "tenantId",
      groups: [{ group: 1, members: [0, 1] }],
      rules: [{ when: { region: "MX", regulatoryClass: { oneOf: ["bank"] } }, group: 1 }],
    });
    s.select({ tenantId: "t", region: "MX" });
    // @ts-expect-error region is required by Customer
    s.select({ tenantId: "t" });
    // @ts-expect-error not a property of Customer
    createShardSelector<Customer>({ routingKey: "customerId", groups: [] });
    createShardSelector<Customer>({
      routingKey: "tenantId",
      groups: [],
      // @ts-expect-error not a property of Customer
      rules: [{ when: { country: "MX" }, group: 1 }],
    });
  });

  it("explain narrows by how the member was chosen", () => {
    const e = {} as SelectionExplanation;
    if (e.member.by === "split") expectTypeOf(e.member.splitBy).toEqualTypeOf<string>();
    if (e.member.by === "hash") expectTypeOf(e.member.keyHash).toEqualTypeOf<number>();
    if (e.group.by === "rule") expectTypeOf(e.group.rule).toEqualTypeOf<number>();
  });

  it("error codes are a closed union", () => {
    expectTypeOf<SelectorError["code"]>().toEqualTypeOf<SelectorErrorCode>();
    expectTypeOf(new NoGroupMatchError("x").code).toEqualTypeOf<"NO_GROUP_MATCH">();
    // @ts-expect-error not a selector error code
    const nope: SelectorErrorCode = "NOPE";
    void nope;
  });

  it("a config can be declared on its own and passed in later", () => {
    const config: ShardSelectorConfig<Customer> = {
      routingKey: "tenantId",
      groups: [{ group: 0, members: [0] }],
    };
    expectTypeOf(createShardSelector<Customer>(config)).toEqualTypeOf<ShardSelector<Customer>>();
    // The row type is never guessed from the config's literals: without it, rows are plain records.
    expectTypeOf(createShardSelector(config)).toEqualTypeOf<ShardSelector<Record<string, unknown>>>();
    expectTypeOf<ShardSelectorConfig["defaultGroup"]>().toEqualTypeOf<number | undefined>();
  });
});
