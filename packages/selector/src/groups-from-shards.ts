// Groups whose members are the shards a deployment has: `groupsFromShards` turns a list of shards
// (a registry's, a config file's) into the `groups` of a selector's config, and refuses a group
// that has no shard before the selector would (with a path into a config the caller never wrote).
import type { GroupConfig } from "./config.js";
import { InvalidSelectorConfigError } from "./errors.js";

/** A group of a selector's config without its members: they come from the shards (`groupsFromShards`). */
export type GroupOfShards = Omit<GroupConfig, "members">;

/** A shard as `groupsFromShards` reads it: a `ShardIdentifier` or anything with its `group` and `member`. */
export interface ShardOfGroup {
  readonly group: number;
  readonly member: number;
}

export interface GroupsFromShardsOptions {
  /**
   * The error to throw when groups have no shard, said in the deployment's terms (which setting
   * lists the shards, what the group holds). Default: `InvalidSelectorConfigError`, one issue per
   * group, e.g. `groups[1].members: no shard of group 1 ("mx") among the shards given (0/0, 0/1)`.
   */
  refuse?: (empty: readonly GroupOfShards[]) => Error;
}

/**
 * The `groups` of a selector's config, each with the members of the shards in it: shards `0/0`,
 * `0/1`, `1/3` and groups `[{ group: 0 }, { group: 1, name: "mx" }]` give
 * `[{ group: 0, members: [0, 1] }, { group: 1, name: "mx", members: [3] }]`. Members keep the
 * shards' order, each once; shards of groups not listed are left out. A listed group with no shard
 * could place no row: every such group is refused at once (`options.refuse`).
 */
export function groupsFromShards(
  shards: readonly ShardOfGroup[],
  groups: readonly GroupOfShards[],
  options: GroupsFromShardsOptions = {},
): GroupConfig[] {
  const withMembers = groups.map((group) => ({
    ...group,
    members: [...new Set(shards.filter((s) => s.group === group.group).map((s) => s.member))],
  }));
  const empty = withMembers.filter((g) => g.members.length === 0);
  if (empty.length === 0) return withMembers;
  const without = ({ members: _, ...group }: GroupConfig): GroupOfShards => group;
  if (options.refuse) throw options.refuse(empty.map(without));
  const given = shards.length === 0 ? "none" : shards.map((s) => `${s.group}/${s.member}`).join(", ");
  throw new InvalidSelectorConfigError(
    empty.map((g) => {
      const label = g.name === undefined ? "" : ` (${JSON.stringify(g.name)})`;
      return `groups[${withMembers.indexOf(g)}].members: no shard of group ${g.group}${label} among the shards given (${given})`;
    }),
  );
}
