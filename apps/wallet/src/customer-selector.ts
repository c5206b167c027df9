import type { ShardIdentifier } from "@shardkit/id";
import { createCustomerSelector as customerSelector } from "@shardkit/service-kit/customers";

export { type CustomerProps, REGIONS } from "@shardkit/service-kit/customers";

/** Where new customers go (region picks the group, tenant the shard), in the wallet service's terms. */
export const createCustomerSelector = (shards: readonly ShardIdentifier[]) =>
  customerSelector(shards, "wallet");
