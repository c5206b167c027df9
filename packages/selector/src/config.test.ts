import { isShardkitError } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { formatPath } from "./config.js";
import { SelectorError } from "./errors.js";
import { createShardSelector } from "./selector.js";

function issuesOf(config: unknown): readonly string[] {
  try {
    createShardSelector(config as never);
  } catch (err) {
    expect(err).toBeInstanceOf(SelectorError);
    expect(isShardkitError(err, "INVALID_SELECTOR_CONFIG")).toBe(true);
    const e = err as SelectorError;
    for (const issue of e.issues) expect(e.message).toContain(issue);
    return e.issues;
  }
  throw new Error("expected INVALID_SELECTOR_CONFIG");
}

const ok = { routingKey: "tenantId", groups: [{ group: 1, members: [0, 1] }], defaultGroup: 1 };

describe("config validation", () => {
  it("accepts a minimal config", () => {
    expect(createShardSelector(ok).select({ tenantId: "t" }).group).toBe(1);
  });

  it("lists every structural issue with its path", () => {
    expect(
      issuesOf({
        routingKey: "",
        groups: [
          { group: 0, members: [0] },
          { group: 256, name: "", members: [0, 1, 2, { member: 3, weight: 0 }, { member: 64 }, 1.5, "x"] },
        ],
        rules: [
          { when: { region: ["MX"] }, group: 0 },
          { when: "MX", group: -1 },
        ],
        defualtGroup: 0,
      }),
    ).toEqual([
      "routingKey: must not be empty",
      "groups[1].group: must be an integer 0..255",
      "groups[1].name: must not be empty",
      "groups[1].members[3].weight: must be > 0",
      "groups[1].members[4].member: must be an integer 0..63",
      "groups[1].members[5].member: must be an integer 0..63",
      "groups[1].members[6]: must be a member number 0..63 or { member, weight?, draining? }",
      "rules[0].when.region: must be a value, { equals: value } or { oneOf: [values] }",
      "rules[1].when: must be an object of property: condition",
      "rules[1].group: must be an integer 0..255",
      'config: unknown key "defualtGroup"',
    ]);
  });

  it("rejects what is not a config at all", () => {
    expect(issuesOf(undefined)).toEqual([
      "config: must be an object { routingKey, groups, rules?, defaultGroup? }",
    ]);
    expect(issuesOf({ routingKey: "id", groups: [] })).toEqual(["groups: must list at least one group"]);
    expect(issuesOf({ routingKey: 5, groups: [{ group: 0, members: [] }] })).toEqual([
      'routingKey: must be the name of the property to hash, e.g. "tenantId"',
      "groups[0].members: must list at least one member",
    ]);
  });

  it("checks weights, flags and unknown keys of members", () => {
    expect(
      issuesOf({
        routingKey: "id",
        groups: [
          {
            group: 0,
            members: [
              { member: 0, weight: -1 },
              { member: 1, weight: Number.POSITIVE_INFINITY },
              { member: 2, weight: "2" },
              { member: 3, draining: "yes" },
              { member: 4, wieght: 2 },
            ],
          },
        ],
      }),
    ).toEqual([
      "groups[0].members[0].weight: must be > 0",
      "groups[0].members[1].weight: must be a number > 0",
      "groups[0].members[2].weight: must be a number > 0",
      "groups[0].members[3].draining: must be true or false",
      'groups[0].members[4]: unknown key "wieght"',
    ]);
  });

  it("checks references and duplicates across the config", () => {
    expect(
      issuesOf({
        routingKey: "tenantId",
        groups: [
          { group: 1, members: [0, 1, 1] },
          { group: 1, members: [{ member: 0, draining: true }] },
          { group: 2, members: [3] },
        ],
        rules: [
          { when: { region: "MX" }, group: 9 },
          { when: {}, group: 1 },
          { when: { region: { equals: "A", oneOf: ["B"] } }, group: 1 },
          { when: { region: {} }, group: 1 },
        ],
        defaultGroup: 4,
      }),
    ).toEqual([
      "groups[0].members[2].member: member 1 is listed twice",
      "groups[1].group: group 1 is already declared by groups[0]",
      "groups[1].members: every member is draining: the group could take no new rows",
      "rules[0].group: group 9 is not declared in groups",
      "rules[1].when: must name at least one property",
      "rules[2].when.region: must be a value, { equals: value } or { oneOf: [values] }",
      "rules[3].when.region: must be a value, { equals: value } or { oneOf: [values] }",
      "defaultGroup: group 4 is not declared in groups",
    ]);
  });

  it("checks hot tenants: structure first, then each entry against its group", () => {
    expect(
      issuesOf({
        routingKey: "tenantId",
        groups: [{ group: 1, members: [0], hotTenants: [{ key: "", member: 0, extra: 1 }] }],
      }),
    ).toEqual([
      "groups[0].hotTenants[0].key: must not be empty",
      'groups[0].hotTenants[0]: unknown key "extra"',
    ]);
    expect(
      issuesOf({
        routingKey: "tenantId",
        groups: [
          {
            group: 1,
            members: [0, 1, { member: 2, draining: true }],
            hotTenants: [
              { key: "a", member: 9 },
              { key: "b", member: 2 },
              { key: "a", member: 0 },
              { key: "c", members: [0, 7, 0], splitBy: "tenantId" },
              { key: "d", members: [2], splitBy: "accountId" },
              { key: "e", member: 0, members: [0], splitBy: "x" },
              { key: "f", members: [0] },
              { key: "g", members: [], splitBy: "x" },
            ],
          },
        ],
        defaultGroup: 1,
      }),
    ).toEqual([
      "groups[0].hotTenants[0].member: member 9 is not a member of group 1",
      "groups[0].hotTenants[1].member: member 2 is draining: it takes no new rows",
      'groups[0].hotTenants[2].key: tenant "a" is already listed at hotTenants[0]',
      "groups[0].hotTenants[3].members[1]: member 7 is not a member of group 1",
      "groups[0].hotTenants[3].members[2]: member 0 is listed twice",
      'groups[0].hotTenants[3].splitBy: must differ from routingKey "tenantId"',
      "groups[0].hotTenants[4].members: every member is draining: the tenant could take no new rows",
      "groups[0].hotTenants[5]: has both member (pin) and members/splitBy (pre-split): choose one",
      "groups[0].hotTenants[6]: needs member (pin) or both members and splitBy (pre-split)",
      "groups[0].hotTenants[7].members: must list at least one member",
    ]);
  });

  it("formats paths like property accessors", () => {
    expect(formatPath(["groups", 1, "members", 3, "weight"])).toBe("groups[1].members[3].weight");
    expect(formatPath(["rules", 0, "when", "customer-region"])).toBe('rules[0].when["customer-region"]');
    expect(formatPath([])).toBe("config");
  });
});
