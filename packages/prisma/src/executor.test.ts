import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { Executor } from "./executor.js";
import { isEmptyAnswer } from "./owned.js";
import { Planner } from "./planner.js";
import type { DataModel } from "./prisma-private.js";
import { createShardRegistry } from "./registry.js";

// The executor runs plans through an injected call: here one that records what it is asked, so
// what runs when is visible without a database.
const model: DataModel = {
  models: {
    Customer: {
      fields: { id: { kind: "scalar", type: "String" }, name: { kind: "scalar", type: "String" } },
    },
  },
};
const databases = [{ $disconnect: async () => {} }, { $disconnect: async () => {} }];
const registry = createShardRegistry({
  shards: [
    { shard: ShardIdentifier.of(0, 0), client: databases[0]! },
    { shard: ShardIdentifier.of(1, 0), client: databases[1]! },
  ],
});
const planner = new Planner(model, registry, { keyless: "scatter" });

function recording() {
  const calls: { database: number; operation: string; args: unknown }[] = [];
  const executor = new Executor(planner, async (client, _model, operation, args) => {
    calls.push({ database: databases.indexOf(client as never), operation, args });
    return operation === "count" ? 1 : [];
  });
  return { calls, executor, view: { clients: databases } };
}

describe("Executor", () => {
  it("a scatter starts only when awaited, then asks every database once", async () => {
    const { calls, executor, view } = recording();
    const pending = executor.run(view, "Customer", "count", {});
    await Promise.resolve();
    expect(calls).toEqual([]);
    expect(await pending).toBe(2);
    expect(calls.map((c) => c.database)).toEqual([0, 1]);
  });

  it("a refusal rejects only when awaited, with the planner's typed error", async () => {
    const { calls, executor, view } = recording();
    const refused = executor.run(view, "Customer", "deleteMany", {}); // a keyless write: never scattered
    expect(calls).toEqual([]);
    await expect(refused).rejects.toMatchObject({ code: "SHARD_KEY_REQUIRED" });
  });

  it("a keyed call runs once, unchanged, on its shard's database", async () => {
    const { calls, executor, view } = recording();
    const args = { where: { id: ShardedId.generate("Customer", ShardIdentifier.of(1, 0)) } };
    await executor.run(view, "Customer", "findUnique", args);
    expect(calls).toEqual([{ database: 1, operation: "findUnique", args }]);
  });

  it("inside a shard transaction every call runs on the transaction's client, checked against its shard", async () => {
    const { calls, executor } = recording();
    const tx = databases[0]!;
    const shard = ShardIdentifier.of(0, 0);
    await executor.runIn(tx, shard, "Customer", "count", {});
    expect(calls).toEqual([{ database: 0, operation: "count", args: {} }]);
    const elsewhere = { where: { id: ShardedId.generate("Customer", ShardIdentifier.of(1, 0)) } };
    await expect(executor.runIn(tx, shard, "Customer", "findUnique", elsewhere)).rejects.toMatchObject({
      code: "CROSS_SHARD",
    });
    expect(calls).toHaveLength(1);
  });
});

describe("isEmptyAnswer (what a former owner must confirm before it is returned)", () => {
  it.each([
    [null, "findUnique"],
    [[], "findMany"],
    [{ count: 0 }, "updateMany"],
    [0, "count"],
    [{ _all: 0, name: 0 }, "count"],
    [{ _count: 0, _sum: { balance: null } }, "aggregate"],
    [{ _count: { _all: 0 }, _max: { name: null } }, "aggregate"],
  ] as const)("%j from %s found nothing", (answer, operation) => {
    expect(isEmptyAnswer(answer, operation)).toBe(true);
  });

  it.each([
    [{ id: "x", balance: 0 }, "findUnique"],
    [[{ id: "x" }], "findMany"],
    [{ count: 2 }, "updateMany"],
    [3, "count"],
    [{ _all: 1 }, "count"],
    [{ _count: 0, _sum: { balance: 5 } }, "aggregate"],
    [{ id: "x", count: 0 }, "update"],
  ] as const)("%j from %s found something", (answer, operation) => {
    expect(isEmptyAnswer(answer, operation)).toBe(false);
  });
});
