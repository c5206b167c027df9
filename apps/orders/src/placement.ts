import type { ShardIdentifier } from "@shardkit/id";
import { createShardSelector } from "@shardkit/selector";

export interface CustomerPlacement {
  region: string;
  tenant: string;
}

/** EU countries go to group 0, Mexico to group 1; a region no rule names is refused. */
export const REGIONS = { eu: ["DE", "ES", "FR", "IE", "IT", "NL", "PT"], mx: ["MX"] };

/**
 * Where new customers go: the region picks the group (residency), a consistent hash of the tenant
 * picks one of the group's shards. Members are the shards the registry has in that group.
 */
export function createPlacement(shards: readonly ShardIdentifier[]) {
  const membersOf = (group: number) => shards.filter((s) => s.group === group).map((s) => s.member);
  return createShardSelector<CustomerPlacement>({
    routingKey: "tenant",
    groups: [
      { group: 0, name: "eu", members: membersOf(0) },
      { group: 1, name: "mx", members: membersOf(1) },
    ],
    rules: [
      { name: "mx", when: { region: { oneOf: REGIONS.mx } }, group: 1 },
      { name: "eu", when: { region: { oneOf: REGIONS.eu } }, group: 0 },
    ],
  });
}
