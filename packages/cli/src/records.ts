// What each database records of shard ownership, for `status`, `redrive` and `move --dry-run`:
// `readPartitionMap` of `@shardkit/ownership`, which only SELECTs (opening a PartitionMap would
// install its functions and record unrecorded shards, which a command that only looks must not do).
import { type PartitionView, readPartitionMap } from "@shardkit/ownership";
import type { OpenedConfig, RawClient } from "./config.js";

/** True when a database error says a table (relation) does not exist. */
export function isMissingTable(error: unknown): boolean {
  const text = `${(error as { code?: unknown })?.code ?? ""} ${(error as Error)?.message ?? ""} ${JSON.stringify((error as { meta?: unknown })?.meta ?? {})}`;
  return /42P01|relation "?[\w."]+"? does not exist|TableDoesNotExist/.test(text);
}

/**
 * Reads the records and routes the registry to the shards' owners by them (`view.apply()`, in this
 * process only), so that what runs next (outbox lag, health, redrive) sees shards that moved since
 * the configuration was written at their current owner. Each shard read keeps where the
 * configuration put the shard (`configured`).
 */
export async function applyRecords(
  opened: OpenedConfig,
  timeoutMs: number,
): Promise<PartitionView<RawClient>> {
  const view = await readPartitionMap(opened.registry, { timeoutMs });
  view.apply();
  return view;
}
