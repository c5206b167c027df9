import type { ShardIdentifier } from "@shardkit/id";
import { createShardSelector } from "@shardkit/selector";

export interface CustomerPlacement {
  region: string;
  tenant: string;
}

/** EU countries go to group 0, Mexico to group 1; a region no rule names is refused. */
export const REGIONS = { eu: ["DE", "ES", "FR", "IE", "IT", "NL", "PT"], mx: ["MX"] };
/** The group of each region. */
const GROUPS = { eu: 0, mx: 1 } as const;
const SERVICE = "orders";

/**
 * Where new customers go: the region picks the group (residency), a consistent hash of the tenant
 * picks one of the group's shards. Members are the shards the registry has in that group.
 */
export function createPlacement(shards: readonly ShardIdentifier[]) {
  const membersOf = (group: number) => shards.filter((s) => s.group === group).map((s) => s.member);
  // Said in the deployment's terms (the selector would name its own config: `groups[1].members`).
  const missing = Object.entries(GROUPS).filter(([, group]) => membersOf(group).length === 0);
  if (missing.length > 0) {
    const lacking = missing.map(
      ([region, group]) =>
        `no shard of group ${group}, where customers of ${REGIONS[region as keyof typeof REGIONS].join(", ")} are placed (region ${region})`,
    );
    const example = `{"group":${missing[0]![1]},"member":0,"url":"postgresql://..."}`;
    throw new Error(
      `${SERVICE} service: bad shard configuration: ${lacking.join("; ")}. List at least one shard of each group in SHARDKIT_SHARDS, e.g. ${example}`,
    );
  }
  return createShardSelector<CustomerPlacement>({
    routingKey: "tenant",
    groups: [
      { group: GROUPS.eu, name: "eu", members: membersOf(GROUPS.eu) },
      { group: GROUPS.mx, name: "mx", members: membersOf(GROUPS.mx) },
    ],
    rules: [
      { name: "mx", when: { region: { oneOf: REGIONS.mx } }, group: GROUPS.mx },
      { name: "eu", when: { region: { oneOf: REGIONS.eu } }, group: GROUPS.eu },
    ],
  });
}
