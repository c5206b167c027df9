import { PGlite } from "@electric-sql/pglite";
import { ShardedId } from "@shardkit/id";
import { createShardRegistry } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { patient } from "@shardkit/test-db";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { routedClient, S, TABLES } from "../test/layout.js";
import { transfer } from "../test/world.js";
import { PartitionMap } from "./map.js";
import { moveShard } from "./move.js";
import { refusalOf } from "./refusal.js";

/** Two embedded databases with the test schema. */
async function twoPGlites() {
  const dbs = [new PGlite(), new PGlite()];
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: dbs.map((db, i) => ({ name: `pglite-${i}`, adapter: new PrismaPGlite(db) })),
    onProgress: () => {},
  });
  return dbs;
}

/** A router over them: the first holds 0/0 and 0/1, the second is a spare. */
function routerOverPGlites(dbs: PGlite[]) {
  const clients = dbs.map((db) => new PrismaClient({ adapter: new PrismaPGlite(db) }));
  const registry = createShardRegistry({
    shards: [
      { shard: S.g0m0, client: clients[0]! },
      { shard: S.g0m1, client: clients[0]! },
    ],
    databases: [{ client: clients[1]!, name: "spare" }],
  });
  return { clients, registry, db: routedClient(registry) };
}

describe("embedded PGlite", () => {
  it(
    "the same map and fence: the old owner refuses, a stale router is refused and retried at the new owner",
    async () => {
      const dbs = await twoPGlites();
      const routerOver = () => routerOverPGlites(dbs);
      const mover = routerOver();
      const stale = routerOver();
      const map = await PartitionMap.open({ registry: mover.registry, tables: TABLES });
      const staleMap = await PartitionMap.open({ registry: stale.registry, tables: TABLES });
      const id = ShardedId.generate("Bucket", S.g0m1);
      await mover.db.bucket.create({ data: { id, name: "B-173", remaining: 3 } });

      const spare = mover.registry.databases.find((p) => p.name === "spare")!;
      await transfer(map, S.g0m1, spare, async () => {
        const refused = await mover.clients[0]!.bucket.update({
          where: { id },
          data: { remaining: 0 },
        }).catch((e: unknown) => e);
        expect(refusalOf(refused)).toMatchObject({ shard: S.g0m1, state: "fenced", epoch: 1 });
      });

      const updated = await stale.db.bucket.update({ where: { id }, data: { remaining: 2 } });
      expect(updated.remaining).toBe(2);
      expect(staleMap.counters.staleRejections).toBe(1);
      expect(stale.registry.databaseOf(S.g0m1).name).toBe("spare");
      expect((await mover.clients[1]!.bucket.findUnique({ where: { id } }))?.remaining).toBe(2);
      map.close();
      staleMap.close();
      for (const db of dbs) await db.close();
    },
    patient(60_000),
  );

  it(
    "an offline move (fence, copy, verify, switch) of a shard with 2,000 rows, the freeze measured",
    async () => {
      const dbs = await twoPGlites();
      const { clients, registry, db } = routerOverPGlites(dbs);
      const map = await PartitionMap.open({ registry, tables: TABLES });
      const buckets = Array.from({ length: 2000 }, (_, i) => ({
        id: ShardedId.generate("Bucket", S.g0m1) as string,
        name: `B-${i}`,
        remaining: i,
      }));
      await db.$transactionOn(S.g0m1, (tx) => tx.bucket.createMany({ data: buckets }));
      const spare = registry.databases.find((p) => p.name === "spare")!;
      const result = await moveShard({
        map,
        shard: S.g0m1,
        to: spare,
        mode: "offline",
        onProgress: () => {},
      });
      expect(result).toMatchObject({
        mode: "offline",
        from: "database #0",
        to: "spare",
        epoch: 2,
        rows: { Bucket: 2000 },
      });
      expect(result.freezeMs).toBeGreaterThan(0);
      console.log(
        `PGlite offline move of 2,000 rows: writes held ${result.freezeMs} ms, ${result.durationMs} ms in all`,
      );
      expect(await clients[1]!.bucket.count()).toBe(2000);
      expect(await clients[0]!.bucket.count()).toBe(0);
      const updated = await db.bucket.update({ where: { id: buckets[7]!.id }, data: { remaining: 0 } });
      expect(updated.remaining).toBe(0);
      map.close();
      for (const pglite of dbs) await pglite.close();
    },
    patient(60_000),
  );
});
