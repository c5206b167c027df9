import type { ShardIdentifier } from "@shardkit/id";
import type { Telemetry } from "./telemetry.js";

/**
 * What a partition map (`@shardkit/ownership`) plugs into routing: how to recognise a database's
 * refusal of a write for a shard it does not own, and how to bring the layout up to date. With
 * it, a routed write or a shard transaction that reaches a former owner is retried at the current
 * one: refresh, plan again, run again, a limited number of times.
 */
export interface OwnershipHook {
  /** The shard `error` is a stale-owner refusal for, or undefined when it is not one. */
  rejection(error: unknown): { shard: ShardIdentifier } | undefined;
  /**
   * Brings the layout up to date after a refusal (`attempt` counts from 0), waiting a little
   * when the shard is between owners (fenced, not yet switched).
   */
  refresh(rejected: { shard: ShardIdentifier }, attempt: number): Promise<void>;
  /** How many times one call runs again after refusals before the refusal is the answer. */
  readonly retries: number;
  /**
   * Runs first in every shard transaction, on its transaction client: asserts that the database
   * owns `shard` at the epoch routing used, so that a decision read in the transaction is refused
   * at a former owner even when it writes nothing.
   */
  begin?(tx: object, shard: ShardIdentifier): Promise<void>;
  /**
   * Runs after a call to `shard` answered that it found nothing (null, an empty list, a count of
   * zero, Prisma's P2025), on the client that answered (a database's, or a transaction's): asserts
   * that the database still owns `shard` at the epoch routing used, so that a former owner never
   * answers "not found" for a shard it lost (its refusal is retried at the owner).
   */
  confirm?(client: object, shard: ShardIdentifier): Promise<void>;
  /**
   * Runs before a call to `shard` (`write`: it may write; a shard transaction does): undefined
   * when routing may send it now, or a promise that resolves when it may (a write to a shard
   * between owners waits in the router) or rejects with why not (the shard's records cannot be
   * right, its database has not answered the map yet). Nothing to await for a shard with no such
   * state.
   */
  admit?(shard: ShardIdentifier, call: { write: boolean }): Promise<void> | undefined;
  /** What a call throws when its retries are spent (default: the database's refusal as it came). */
  giveUp?(error: unknown): unknown;
}

/**
 * Runs `run`; after a stale-owner refusal, refreshes and runs it again (at most `hook.retries`
 * times). Without a hook, `run` once. `run` must plan again each time: the owner may have changed.
 * Each refusal adds 1 to `shardkit.ownership.stale_rejections` (by shard) when `telemetry` meters.
 */
export async function withCurrentOwner<R>(
  hook: OwnershipHook | undefined,
  run: () => PromiseLike<R>,
  telemetry?: Telemetry | undefined,
): Promise<R> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      const rejected = hook?.rejection(error);
      if (!hook || !rejected) throw error;
      countRejection(telemetry, rejected.shard);
      if (attempt >= hook.retries) throw givenUp(hook, error);
      await hook.refresh(rejected, attempt);
    }
  }
}

/** Adds 1 to `shardkit.ownership.stale_rejections` for `shard` (when `telemetry` meters). */
export function countRejection(telemetry: Telemetry | undefined, shard: ShardIdentifier): void {
  if (!telemetry?.metering) return;
  telemetry
    .counter("shardkit.ownership.stale_rejections", "Writes refused by a former owner of their shard")
    .add(1, telemetry.shard(shard.key));
}

/** What a call refused by a former owner throws once it is not run again: `hook.giveUp`'s error, or the refusal. */
export function givenUp(hook: OwnershipHook, error: unknown): unknown {
  return hook.giveUp ? hook.giveUp(error) : error;
}
