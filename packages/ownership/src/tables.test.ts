import { ShardedId } from "@shardkit/id";
import {
  consumeOnce,
  emitEvent,
  idempotent,
  type ShardRegistry,
  shardRouting,
  UniqueViolationError,
} from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { beforeEach, describe, expect, inject, it } from "vitest";
import type { PrismaClient } from "../test/generated/prisma/client.js";
import { reset, routers, S } from "../test/world.js";
import { checkMove } from "./check.js";
import { OwnershipOptionsError } from "./errors.js";
import { moveShard } from "./move.js";
import { SHARDKIT_TABLES } from "./tables.js";

// @shardkit/prisma's own tables (outbox, idempotency keys, processed events, claims) move with a
// shard although the map lists only the app's tables. Real PostgreSQL: a and b on one logical
// replication server, e a spare on another.
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => reset(urls));

/** Only the app's own tables: shardkit's are left for the map to find. */
const APP_TABLES = [
  { table: "Bucket", column: "id" },
  { table: "Confirmation", column: "id" },
];
const SHARDKIT = [
  "OutboxEvent",
  "IdempotencyKey",
  "ProcessedEvent",
  "UniqueClaim",
  "UniqueClaimToken",
] as const;
const quiet = () => {};

/** A routed client on which a bucket's name is unique across shards (claim rows). */
function uniqueNames(registry: ShardRegistry<PrismaClient>) {
  return registry.databases[0]!.client.$extends(
    shardRouting({
      registry,
      models: {
        Bucket: { keys: ["id"], unique: { name: true } },
        Confirmation: { keys: ["id", "bucketId"] },
      },
    }),
  );
}

/** Rows of shard 0/1 in each of shardkit's tables at one database. */
async function shardRows(client: PrismaClient) {
  const counts: Record<string, number> = {};
  for (const [table, column] of [
    ["OutboxEvent", `((get_byte(uuid_send(id), 8) & 63) << 8) | get_byte(uuid_send(id), 9)`],
    ["IdempotencyKey", "shard"],
    ["ProcessedEvent", "shard"],
    ["UniqueClaim", "shard"],
    ["UniqueClaimToken", "shard"],
  ] as const) {
    const [row] = await client.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM "${table}" WHERE ${column} = $1`,
      S.g0m1.bits,
    );
    counts[table] = row!.n;
  }
  return counts;
}

describe("shardkit's own tables move with their shard", () => {
  it("the map adds the ones the databases have to the app's tables, once each; a listing by another column is refused", async () => {
    const r = make();
    const map = await r.open({ tables: APP_TABLES });
    expect(map.tables).toEqual([...APP_TABLES, ...SHARDKIT_TABLES]);
    map.close();
    // Listed too (by the column its rows name their shard by): kept where the caller put it, once.
    const listed = await r.open({
      tables: [...APP_TABLES, { table: "IdempotencyKey", column: "shard", kind: "bits" }],
    });
    expect(listed.tables.map((t) => t.table)).toEqual([
      "Bucket",
      "Confirmation",
      "IdempotencyKey",
      "OutboxEvent",
      "ProcessedEvent",
      "UniqueClaim",
      "UniqueClaimToken",
    ]);
    listed.close();
    for (const wrong of [
      { table: "UniqueClaim", column: "ownerShard", kind: "bits" as const },
      { table: "IdempotencyKey", column: "shard" },
      { table: "OutboxEvent", column: "aggregateId" },
    ]) {
      const error = await r.open({ tables: [...APP_TABLES, wrong] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OwnershipOptionsError);
      expect((error as OwnershipOptionsError).issues.join("\n")).toMatch(
        new RegExp(`${wrong.table} is @shardkit/prisma's table`),
      );
    }
    // checkMove applies the same rule, and says which tables it checked.
    const check = await checkMove({
      registry: r.registry,
      shard: S.g0m1,
      to: r.databases.e,
      tables: APP_TABLES,
    });
    expect(check.tables).toEqual([...APP_TABLES, ...SHARDKIT_TABLES]);
    expect(check.issues).toEqual([]);
  });

  it("a shardkit table that some databases have and others lack is an error naming them, at open and in checkMove; never left out", async () => {
    const r = make();
    await r.clients.e.$executeRawUnsafe(`ALTER TABLE "UniqueClaim" RENAME TO "UniqueClaimAway"`);
    try {
      const error = await r.open({ tables: APP_TABLES }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OwnershipOptionsError);
      expect((error as OwnershipOptionsError).issues).toEqual([
        "UniqueClaim: a, b have it and e does not; its rows could not move with their shards (roll the same schema out to every database)",
      ]);
      const check = await checkMove({
        registry: r.registry,
        shard: S.g0m1,
        to: r.databases.e,
        tables: APP_TABLES,
      });
      expect(check.issues).toContain(
        "UniqueClaim: a, b have it and e does not; its rows could not move with their shards (roll the same schema out to every database)",
      );
      expect(check.tables.map((t) => t.table)).not.toContain("UniqueClaim");
    } finally {
      await r.clients.e.$executeRawUnsafe(`ALTER TABLE "UniqueClaimAway" RENAME TO "UniqueClaim"`);
    }
  });

  it.each(["live", "offline"] as const)(
    "%s move of a shard listing only the app's tables: its claims, processed events, keys and events are at the new owner and none at the old; a claim taken before the move refuses a duplicate after it",
    async (mode) => {
      const r = make();
      const map = await r.open({ tables: APP_TABLES });
      const db = uniqueNames(r.registry);
      // Buckets with names unique across shards: each name's claim lives on the shard its hash picks,
      // some of them on 0/1 (the shard that moves) although their buckets are on 0/0 and 1/0.
      const names = Array.from({ length: 12 }, (_, i) => `N-${i}`);
      for (const [i, name] of names.entries()) {
        await db.bucket.create({
          data: { id: ShardedId.generate("Bucket", i % 2 ? S.g0m0 : S.g1m0), name, remaining: 1 },
        });
      }
      const onMoving = await r.clients.a.uniqueClaim.findMany({ where: { shard: S.g0m1.bits } });
      expect(onMoving.length).toBeGreaterThan(0);
      // The shard's own rows: a bucket, an event, a command's key, a consumed event.
      const bucket = ShardedId.generate("Bucket", S.g0m1);
      await db.bucket.create({ data: { id: bucket, name: "moving", remaining: 5 } });
      const consumed = ShardedId.generate("Event", S.g1m0);
      const command = { shard: S.g0m1, kind: "confirm", key: "k-1" };
      await r.db.$transactionOn(S.g0m1, async (tx) => {
        await emitEvent(tx, S.g0m1, { topic: "bucket.confirmed", aggregateId: bucket, payload: {} });
        await idempotent(tx, command, { bucket }, async () => "confirmed");
        await consumeOnce(tx, S.g0m1, "audit", consumed);
      });
      const before = await shardRows(r.clients.a);
      for (const table of SHARDKIT) expect(before[table], table).toBeGreaterThan(0);

      const [claim] = onMoving;
      const result = await moveShard({
        map,
        shard: S.g0m1,
        to: r.databases.e,
        mode,
        ...(mode === "live" ? { sourceConnection: urls.a } : {}),
        onProgress: quiet,
        // A claim changes at the source while the shard's rows stream (a live move): it replicates.
        afterStep: async (step) => {
          if (step === "copy" && mode === "live") {
            await r.clients.a.uniqueClaim.update({
              where: { scope_value: { scope: claim!.scope, value: claim!.value } },
              data: { stored: claim!.stored.toUpperCase() },
            });
          }
        },
      });
      expect(result.rows).toMatchObject({
        Bucket: 1,
        OutboxEvent: before.OutboxEvent,
        IdempotencyKey: before.IdempotencyKey,
        ProcessedEvent: before.ProcessedEvent,
        UniqueClaim: before.UniqueClaim,
        UniqueClaimToken: before.UniqueClaimToken,
      });
      expect(await shardRows(r.clients.e)).toEqual(before);
      expect(await shardRows(r.clients.a)).toEqual({
        OutboxEvent: 0,
        IdempotencyKey: 0,
        ProcessedEvent: 0,
        UniqueClaim: 0,
        UniqueClaimToken: 0,
      });
      if (mode === "live") {
        expect(
          (
            await r.clients.e.uniqueClaim.findUnique({
              where: { scope_value: { scope: claim!.scope, value: claim!.value } },
            })
          )?.stored,
        ).toBe(claim!.stored.toUpperCase());
      }

      // A router that starts after the move: the claim is at the owner, so the value stays taken.
      const later = make();
      const laterMap = await later.open({ tables: APP_TABLES });
      expect(later.registry.databaseOf(S.g0m1).name).toBe("e");
      const dbLater = uniqueNames(later.registry);
      await expect(
        dbLater.bucket.create({
          data: { id: ShardedId.generate("Bucket", S.g0m0), name: claim!.value.toUpperCase(), remaining: 1 },
        }),
      ).rejects.toBeInstanceOf(UniqueViolationError);
      // The mover's own router refuses it too.
      await expect(
        db.bucket.create({
          data: { id: ShardedId.generate("Bucket", S.g1m0), name: claim!.value, remaining: 1 },
        }),
      ).rejects.toBeInstanceOf(UniqueViolationError);
      // The command's key and the consumed event moved too: a retry replays, a redelivery is skipped.
      await later.db.$transactionOn(S.g0m1, async (tx) => {
        expect(await idempotent(tx, command, { bucket }, async () => "again")).toEqual({
          result: "confirmed",
          replayed: true,
        });
        expect(await consumeOnce(tx, S.g0m1, "audit", consumed)).toBe(false);
      });
      laterMap.close();
      map.close();
    },
    patient(120_000),
  );

  it(
    "routers that missed the move: their claims reach the former owner, are refused, and are taken at the new owner; a duplicate is still refused as taken",
    async () => {
      const r = make();
      const map = await r.open({ tables: APP_TABLES });
      // Opened before the move and never refreshed (not started): they miss it.
      const [one, two] = [make(), make()];
      const [oneMap, twoMap] = [
        await one.open({ tables: APP_TABLES }),
        await two.open({ tables: APP_TABLES }),
      ];
      const db = uniqueNames(r.registry);
      const names = Array.from({ length: 12 }, (_, i) => `Before-${i}`);
      for (const [i, name] of names.entries()) {
        await db.bucket.create({
          data: { id: ShardedId.generate("Bucket", i % 2 ? S.g0m0 : S.g1m0), name, remaining: 1 },
        });
      }
      const [taken] = await r.clients.a.uniqueClaim.findMany({ where: { shard: S.g0m1.bits } });
      expect(taken).toBeDefined();
      await moveShard({ map, shard: S.g0m1, to: r.databases.e, mode: "offline", onProgress: quiet });
      expect(one.registry.databaseOf(S.g0m1).name).toBe("a");
      expect(two.registry.databaseOf(S.g0m1).name).toBe("a");

      // A value claimed before the move: its claim is tried at a, refused there, found at e: taken.
      await expect(
        uniqueNames(one.registry).bucket.create({
          data: { id: ShardedId.generate("Bucket", S.g0m0), name: taken!.stored, remaining: 1 },
        }),
      ).rejects.toBeInstanceOf(UniqueViolationError);
      expect(oneMap.counters.staleRejections).toBe(1);
      expect(one.registry.databaseOf(S.g0m1).name).toBe("e");

      // New names, some of whose claims belong on 0/1: every create succeeds, its claims held at e.
      const fresh = uniqueNames(two.registry);
      for (const [i, name] of Array.from({ length: 12 }, (_, i) => `After-${i}`).entries()) {
        await fresh.bucket.create({
          data: { id: ShardedId.generate("Bucket", i % 2 ? S.g0m0 : S.g1m0), name, remaining: 1 },
        });
      }
      expect(twoMap.counters.staleRejections).toBe(1);
      const claimsAtE = await r.clients.e.uniqueClaim.findMany({ where: { shard: S.g0m1.bits } });
      expect(claimsAtE.some((c) => c.stored.startsWith("After-"))).toBe(true);
      expect(claimsAtE.every((c) => c.state === "held")).toBe(true);
      expect(await r.clients.a.uniqueClaim.count({ where: { shard: S.g0m1.bits } })).toBe(0);
      twoMap.close();
      oneMap.close();
      map.close();
    },
    patient(120_000),
  );
});
