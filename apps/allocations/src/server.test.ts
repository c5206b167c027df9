import { moveShard } from "@shardkit/ownership";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AllocationService } from "./allocation-service.js";
import { openServiceRouter } from "./shards.js";

// The service's configuration on PostgreSQL: SHARDKIT_SHARDS with a spare database for moves.
const names = [`sk_alloc_a_${process.pid}`, `sk_alloc_e_${process.pid}`];
let urls: string[];
beforeAll(async () => {
  urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
});
afterAll(async () => {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
});

describe("the service on PostgreSQL (SHARDKIT_SHARDS)", () => {
  it(
    "opens the shards and the spare, and keeps confirming after another process moves a bucket's shard to the spare",
    async () => {
      const shardsJson = JSON.stringify({
        shards: [
          { group: 0, member: 0, url: urls[0] },
          { group: 0, member: 1, url: urls[0] },
          { group: 1, member: 0, url: urls[0] },
        ],
        databases: [{ url: urls[1] }],
      });
      const service = await openServiceRouter({ shardsJson, dataDir: "/nonexistent" });
      const mover = await openServiceRouter({ shardsJson, dataDir: "/nonexistent" });
      try {
        expect(service.registry.databases.map((p) => p.shards.length)).toEqual([3, 0]);
        const allocations = new AllocationService(service);
        const { result: bucket } = await allocations.createBucket(
          { name: "B-173", capacity: 5, shard: "0/1" },
          "bucket-key-1",
        );
        await allocations.confirm({ bucketId: bucket.id, desk: "one" }, "confirm-key-1");
        const spare = mover.registry.databases[1]!;
        const moved = await moveShard({
          map: mover.map,
          shard: "0/1",
          to: spare,
          mode: "offline",
          onProgress: () => {},
        });
        expect(moved).toMatchObject({ epoch: 2, rows: { Bucket: 1, Confirmation: 1, IdempotencyKey: 2 } });
        // The service learns of the move at its next poll or its first refused write; either way the
        // confirmation is decided at the new owner, and the first key still answers what it decided.
        await allocations.confirm({ bucketId: bucket.id, desk: "two" }, "confirm-key-2");
        expect(service.registry.databaseOf(bucket.id)).toBe(service.registry.databases[1]);
        const replay = await allocations.confirm({ bucketId: bucket.id, desk: "one" }, "confirm-key-1");
        expect(replay.replayed).toBe(true);
        expect((await allocations.getBucket(bucket.id)).confirmed).toBe(2);
      } finally {
        await mover.close();
        await service.close();
      }
    },
    patient(60_000),
  );
});
