import { isShardkitError, ShardIdentifier } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { InvalidSelectorConfigError } from "./errors.js";
import { groupsFromShards } from "./groups-from-shards.js";
import { createShardSelector } from "./selector.js";

const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1), ShardIdentifier.of(1, 3)];

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

describe("groupsFromShards", () => {
  it("gives each group the members of its shards, in their order, each once; other groups' shards are left out", () => {
    const groups = groupsFromShards(
      [...shards, ShardIdentifier.of(0, 1), ShardIdentifier.of(7, 2), { group: 1, member: 0 }],
      [{ group: 1, name: "mx", hotTenants: [{ key: "acme", member: 3 }] }, { group: 0 }],
    );
    expect(groups).toEqual([
      { group: 1, name: "mx", hotTenants: [{ key: "acme", member: 3 }], members: [3, 0] },
      { group: 0, members: [0, 1] },
    ]);
    const selector = createShardSelector<{ region: string; tenant: string }>({
      routingKey: "tenant",
      groups,
      rules: [{ when: { region: "MX" }, group: 1 }],
      defaultGroup: 0,
    });
    expect(selector.select({ region: "MX", tenant: "acme" })).toBe(ShardIdentifier.of(1, 3));
    expect(selector.select({ region: "DE", tenant: "t" }).group).toBe(0);
  });

  it("refuses every group with no shard at once, naming its path, its label and the shards given", () => {
    const error = thrown(() =>
      groupsFromShards(shards.slice(0, 2), [{ group: 0 }, { group: 1, name: "mx" }, { group: 2 }]),
    );
    expect(error).toBeInstanceOf(InvalidSelectorConfigError);
    expect(isShardkitError(error, "INVALID_SELECTOR_CONFIG")).toBe(true);
    expect((error as InvalidSelectorConfigError).issues).toEqual([
      'groups[1].members: no shard of group 1 ("mx") among the shards given (0/0, 0/1)',
      "groups[2].members: no shard of group 2 among the shards given (0/0, 0/1)",
    ]);
    expect((thrown(() => groupsFromShards([], [{ group: 0 }])) as Error).message).toBe(
      "Invalid shard selector config (1 issue):\n  - groups[0].members: no shard of group 0 among the shards given (none)",
    );
  });

  it("with `refuse`, throws the deployment's own error, given the groups with no shard", () => {
    const refuse = (empty: readonly { group: number; name?: string }[]) =>
      new Error(`add a shard of ${empty.map((g) => `${g.name ?? "?"} (group ${g.group})`).join(" and ")}`);
    expect(() =>
      groupsFromShards(
        [ShardIdentifier.of(1, 0)],
        [
          { group: 0, name: "eu" },
          { group: 1, name: "mx" },
        ],
        {
          refuse,
        },
      ),
    ).toThrow(new Error("add a shard of eu (group 0)"));
    expect(() =>
      groupsFromShards(
        [],
        [
          { group: 0, name: "eu", hotTenants: [] },
          { group: 1, name: "mx" },
        ],
        {
          refuse: (empty) => new Error(JSON.stringify(empty)),
        },
      ),
    ).toThrow('[{"group":0,"name":"eu","hotTenants":[]},{"group":1,"name":"mx"}]');
  });
});
