import { ShardIdentifier } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { place } from "./place.js";
import type { Obj, Plan, Spread } from "./plan.js";
import { createShardRegistry } from "./registry.js";

// Placing a plan over several shards: one target per database holding some of them, in database
// order. A spread over every shard held now is read off the databases (not shard by shard); both
// ways give the same targets, before and after a shard moves.
const databases = [0, 1, 2, 3].map(() => ({ $disconnect: async () => {} }));
const shards = Array.from({ length: 12 }, (_, i) => ShardIdentifier.of(i >> 2, i & 3));

function setup() {
  const registry = createShardRegistry({
    shards: shards.map((shard, i) => ({ shard, client: databases[i % 3]! })),
    databases: [{ client: databases[3]! }], // a spare, holding nothing
  });
  return registry;
}

/** A read over `of`, whose args for some shards name them (as an `in` list cut per database would). */
function plan(of: readonly ShardIdentifier[]): Extract<Plan, { kind: "shards" }> {
  const spread: Spread = {
    shards: [...of].sort((x, y) => x.bits - y.bits),
    argsFor: (some): Obj => ({ where: { shard: { in: some.map((s) => s.key) } } }),
  };
  return { kind: "shards", spread, write: false, options: {} };
}

/** The targets, placed shard by shard, as a reference. */
function byShard(of: readonly ShardIdentifier[], registry: ReturnType<typeof setup>) {
  const held = new Map<number, ShardIdentifier[]>();
  for (const s of [...of].sort((x, y) => x.bits - y.bits)) {
    const d = registry.databaseOf(s).index;
    held.set(d, [...(held.get(d) ?? []), s]);
  }
  return [...held]
    .sort(([x], [y]) => x - y)
    .map(([database, list]) => ({
      database,
      shards: list,
      args: { where: { shard: { in: list.map((s) => s.key) } } },
    }));
}

describe("place", () => {
  it("every shard: one target per database that holds any, none for a spare, the same as shard by shard", () => {
    const registry = setup();
    const { shape, targets } = place(plan(shards), registry);
    expect(shape).toBe("scatter");
    expect(targets).toEqual(byShard(shards, registry));
    expect(targets.map((t) => t.database)).toEqual([0, 1, 2]);
  });

  it("after a shard moves (to the spare), every shard lands where it is now", () => {
    const registry = setup();
    const moved = shards[4]!;
    registry.assign(moved, registry.databases[3]!, 1);
    const { targets } = place(plan(shards), registry);
    expect(targets).toEqual(byShard(shards, registry));
    expect(targets.map((t) => t.database)).toEqual([0, 1, 2, 3]);
    expect(targets[3]!.shards).toEqual([moved]);
  });

  it("some shards: only the databases holding them, each with its own", () => {
    const registry = setup();
    const some = [shards[0]!, shards[3]!, shards[7]!];
    expect(place(plan(some), registry).targets).toEqual(byShard(some, registry));
  });

  it("a target's shards are its own copy: a later move does not change what was placed", () => {
    const registry = setup();
    const { targets } = place(plan(shards), registry);
    const before = targets.map((t) => [...t.shards]);
    registry.assign(shards[0]!, registry.databases[2]!, 1);
    expect(targets.map((t) => t.shards)).toEqual(before);
    expect(targets[0]!.shards).not.toBe(registry.databases[0]!.shards);
  });
});
