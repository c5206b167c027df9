import { isShardkitError, ShardIdentifier } from "@shardkit/id";
import { thrownBy } from "@shardkit/vitest-config/errors";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ShardSelectorConfig } from "./config.js";
import { SelectorError } from "./errors.js";
import { createShardSelector } from "./selector.js";

interface Customer {
  tenantId?: unknown;
  region?: unknown;
  regulatoryClass?: unknown;
  plan?: unknown;
  accountId?: unknown;
}

const config: ShardSelectorConfig<Customer> = {
  routingKey: "tenantId",
  groups: [
    { group: 0, name: "global", members: [0, 1, 2, 3] },
    {
      group: 1,
      name: "mx-onshore",
      members: [0, 1, { member: 2, draining: true }, 5],
      hotTenants: [
        { key: "acme", member: 5 },
        { key: "megabank", members: [0, 1, 2, 5], splitBy: "accountId" },
      ],
    },
    { group: 2, name: "eu", members: [{ member: 7, weight: 2 }, 8] },
  ],
  rules: [
    { name: "mx-bank", when: { region: "MX", regulatoryClass: "bank" }, group: 1 },
    { name: "eu", when: { region: { oneOf: ["DE", "FR", "ES"] } }, group: 2 },
    { name: "eu-plan", when: { plan: { equals: "eu-resident" } }, group: 2 },
  ],
  defaultGroup: 0,
};
const selector = createShardSelector(config);

const thrown = (fn: () => unknown) => thrownBy(fn, SelectorError);

describe("group rules", () => {
  it("the first rule whose conditions all hold picks the group", () => {
    expect(selector.select({ region: "MX", regulatoryClass: "bank", tenantId: "t1" }).group).toBe(1);
    expect(selector.select({ region: "FR", tenantId: "t1" }).group).toBe(2);
    expect(
      selector.select({ region: "MX", regulatoryClass: "bank", plan: "eu-resident", tenantId: "t1" }).group,
    ).toBe(1);
    expect(selector.select({ region: "US", plan: "eu-resident", tenantId: "t1" }).group).toBe(2);
  });

  it("a partial match is no match: the row falls to the next rule or the default group", () => {
    expect(selector.select({ region: "MX", regulatoryClass: "fintech", tenantId: "t1" }).group).toBe(0);
    expect(selector.select({ region: "MX", tenantId: "t1" }).group).toBe(0);
    expect(selector.select({ tenantId: "t1" }).group).toBe(0);
  });

  it("compares strictly: no coercion between strings, numbers and booleans, no case folding", () => {
    const s = createShardSelector({
      routingKey: "id",
      groups: [
        { group: 3, members: [0] },
        { group: 4, members: [0] },
        { group: 9, members: [0] },
      ],
      rules: [
        { when: { tier: 1 }, group: 3 },
        { when: { vip: true }, group: 4 },
      ],
      defaultGroup: 9,
    });
    expect(s.select({ id: "x", tier: 1 }).group).toBe(3);
    expect(s.select({ id: "x", tier: "1" }).group).toBe(9);
    expect(s.select({ id: "x", vip: true }).group).toBe(4);
    expect(s.select({ id: "x", vip: "true" }).group).toBe(9);
    expect(s.select({ id: "x", vip: 1 }).group).toBe(9);
    expect(selector.select({ region: "mx", regulatoryClass: "bank", tenantId: "t1" }).group).toBe(0);
  });

  it("no match and no default group is an error, never a guess", () => {
    const strict = createShardSelector({ ...config, defaultGroup: undefined });
    const err = thrown(() => strict.select({ region: "US", regulatoryClass: "bank", tenantId: "t1" }));
    expect(err.code).toBe("NO_GROUP_MATCH");
    expect(isShardkitError(err, "NO_GROUP_MATCH")).toBe(true);
    expect(err.message).toBe(
      'No group rule matches this row (region="US", regulatoryClass="bank", plan=undefined) and there is no ' +
        "defaultGroup: refusing to guess where it may live",
    );
    expect(thrown(() => strict.explain({ tenantId: "t1" })).code).toBe("NO_GROUP_MATCH");
  });

  it("a selector with no rules puts everything in the default group", () => {
    const s = createShardSelector({
      routingKey: "tenantId",
      groups: [{ group: 7, members: [4] }],
      defaultGroup: 7,
    });
    expect(s.select({ tenantId: "anything" })).toBe(ShardIdentifier.of(7, 4));
    expect(
      thrown(() =>
        createShardSelector({ routingKey: "tenantId", groups: [{ group: 7, members: [4] }] }).select({
          tenantId: "x",
        }),
      ).message,
    ).toContain("(no rules)");
  });
});

describe("routing key", () => {
  it("is required even when the group has a single member", () => {
    const s = createShardSelector({
      routingKey: "tenantId",
      groups: [{ group: 0, members: [0] }],
      defaultGroup: 0,
    });
    for (const tenantId of [undefined, null, ""]) {
      const err = thrown(() => s.select({ tenantId }));
      expect(err.code).toBe("MISSING_ROUTING_KEY");
      expect(err.message).toMatch(/^The row has no tenantId \(got (undefined|null|"")\)/);
    }
    expect(thrown(() => s.select({})).code).toBe("MISSING_ROUTING_KEY");
  });

  it("must be a string, a finite number or a bigint; numbers hash as their decimal text", () => {
    for (const tenantId of [true, {}, [], Number.NaN, Number.POSITIVE_INFINITY, Symbol("x")]) {
      expect(thrown(() => selector.select({ tenantId })).code).toBe("INVALID_ROUTING_KEY");
    }
    expect(selector.select({ tenantId: 12345 })).toBe(selector.select({ tenantId: "12345" }));
    expect(selector.select({ tenantId: 12345n })).toBe(selector.select({ tenantId: "12345" }));
  });

  it("is checked after the group: a row no rule places reports NO_GROUP_MATCH first", () => {
    const strict = createShardSelector({ ...config, defaultGroup: undefined });
    expect(thrown(() => strict.select({ region: "US" })).code).toBe("NO_GROUP_MATCH");
  });
});

describe("members", () => {
  it("returns interned ShardIdentifiers of a declared, non-draining member", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.constantFrom("MX", "FR", "US"), (tenantId, region) => {
        const shard = selector.select({ tenantId, region, regulatoryClass: "bank" });
        expect(shard).toBe(ShardIdentifier.of(shard.group, shard.member));
        const allowed: Record<number, number[]> = { 0: [0, 1, 2, 3], 1: [0, 1, 5], 2: [7, 8] };
        expect(allowed[shard.group]).toContain(shard.member);
      }),
      { seed: 5, numRuns: 500 },
    );
  });

  it("select and explain always agree", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ minLength: 1 }), fc.constantFrom("acme", "megabank")),
        fc.constantFrom("MX", "FR", "US"),
        fc.string({ minLength: 1 }),
        (tenantId, region, accountId) => {
          const row = { tenantId, region, regulatoryClass: "bank", accountId };
          expect(selector.explain(row).shard).toBe(selector.select(row));
        },
      ),
      { seed: 6, numRuns: 500 },
    );
  });
});

describe("hot tenants", () => {
  const mxBank = { region: "MX", regulatoryClass: "bank" };

  it("a pinned tenant always lands on its member", () => {
    expect(selector.select({ ...mxBank, tenantId: "acme" })).toBe(ShardIdentifier.of(1, 5));
    expect(selector.explain({ ...mxBank, tenantId: "acme" }).member).toEqual({
      by: "pin",
      member: 5,
      routingKey: "tenantId",
      key: "acme",
    });
  });

  it("hot-tenant entries belong to their group: in another group the tenant is hashed as usual", () => {
    const explained = selector.explain({ region: "FR", tenantId: "acme" });
    expect(explained.group.group).toBe(2);
    expect(explained.member.by).toBe("hash");
  });

  it("a pre-split tenant spreads over its non-draining members by the secondary key", () => {
    const seen = new Map<number, number>();
    for (let i = 0; i < 3000; i++) {
      const shard = selector.select({ ...mxBank, tenantId: "megabank", accountId: `acct-${i}` });
      expect(shard.group).toBe(1);
      seen.set(shard.member, (seen.get(shard.member) ?? 0) + 1);
    }
    expect([...seen.keys()].sort()).toEqual([0, 1, 5]); // member 2 is draining
    for (const count of seen.values()) expect(count).toBeGreaterThan(800);
    const again = selector.select({ ...mxBank, tenantId: "megabank", accountId: "acct-7" });
    expect(selector.select({ ...mxBank, tenantId: "megabank", accountId: "acct-7" })).toBe(again);
  });

  it('hot-tenant keys compare as the routing key\'s text: 42 and "42" are the same tenant', () => {
    const s = createShardSelector({
      routingKey: "tenantId",
      groups: [
        {
          group: 0,
          members: [0, 1, 2],
          hotTenants: [
            { key: 42, member: 2 },
            { key: "7", member: 1 },
          ],
        },
      ],
      defaultGroup: 0,
    });
    expect(s.select({ tenantId: 42 })).toBe(ShardIdentifier.of(0, 2));
    expect(s.select({ tenantId: "42" })).toBe(ShardIdentifier.of(0, 2));
    expect(s.select({ tenantId: 7n })).toBe(ShardIdentifier.of(0, 1));
  });

  it("a pre-split tenant without its secondary key is refused", () => {
    const err = thrown(() => selector.select({ ...mxBank, tenantId: "megabank" }));
    expect(err.code).toBe("MISSING_ROUTING_KEY");
    expect(err.message).toContain("no accountId");
  });
});

describe("explain", () => {
  it("says which rule matched and how the member was hashed", () => {
    const e = selector.explain({ region: "MX", regulatoryClass: "bank", tenantId: "tenant-42" });
    expect(e.group).toEqual({ by: "rule", group: 1, name: "mx-onshore", rule: 0, ruleName: "mx-bank" });
    expect(e.member).toEqual({
      by: "hash",
      member: e.shard.member,
      routingKey: "tenantId",
      key: "tenant-42",
      keyHash: 0xaca623b6,
      candidates: [0, 1, 5],
      draining: [2],
    });
    expect(e.reason).toBe(
      `shard 1/${e.shard.member}: group 1 "mx-onshore" by rule 0 "mx-bank" (region = "MX", regulatoryClass = "bank"); ` +
        `member ${e.shard.member} of [0, 1, 5] by rendezvous hash of tenantId "tenant-42" (murmur3 0xaca623b6); ` +
        "draining, skipped: [2]",
    );
  });

  it("reports oneOf rules, the default group and pre-splits", () => {
    expect(selector.explain({ region: "DE", tenantId: "t" }).reason).toMatch(
      /^shard 2\/[78]: group 2 "eu" by rule 1 "eu" \(region in \["DE", "FR", "ES"\]\); member [78] of \[7, 8\] by rendezvous hash of tenantId "t" \(murmur3 0x[0-9a-f]{8}\)$/,
    );
    const fallback = selector.explain({ region: "US", tenantId: "t" });
    expect(fallback.group).toEqual({ by: "default", group: 0, name: "global" });
    expect(fallback.reason).toContain('group 0 "global" by defaultGroup (no rule matched)');
    const split = selector.explain({
      region: "MX",
      regulatoryClass: "bank",
      tenantId: "megabank",
      accountId: "a1",
    });
    expect(split.member).toMatchObject({
      by: "split",
      splitBy: "accountId",
      splitKey: "a1",
      candidates: [0, 1, 5],
    });
    expect(split.reason).toContain(
      'hot tenant tenantId "megabank" pre-split over [0, 1, 5] by rendezvous hash of accountId "a1"',
    );
  });
});
