import { createShardRegistry, type ShardRegistry } from "@shardkit/prisma";
import type { RawClient } from "./config.js";

/**
 * The databases that hold shards now, as a registry of their own over the same clients and names,
 * for the outbox relay: a database holding no shard has nothing for a relay to deliver (relays
 * claim only the events of shards their database owns). Also, the relay names databases by their
 * shards' keys, so two spare databases would both be named "" and its `lag()` and `redrive()` would
 * refuse to run ("two targets are both named \"\"").
 */
export function holdingShards(registry: ShardRegistry<RawClient>): ShardRegistry<RawClient> {
  return createShardRegistry({
    shards: registry.shards.map((shard) => ({ shard, client: registry.physicalOf(shard).client })),
    databases: registry.physical
      .filter((p) => p.shards.length > 0)
      .map((p) => ({ client: p.client, name: p.name })),
  });
}
