import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { createShardRegistry } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { afterAll, inject } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { reset, router, S, TABLES } from "../test/world.js";
import { BalanceLease } from "./balance/lease.js";
import { planBalance } from "./balance/plan.js";
import { runBalance } from "./balance/run.js";
import * as errors from "./errors.js";
import { ShardLease } from "./lease.js";
import { PartitionMap } from "./map.js";
import { moveShard } from "./move.js";

// Every code of @shardkit/ownership, raised through the public API on real PostgreSQL.
const r = router();
afterAll(() => r.close());

type Map = Awaited<ReturnType<typeof r.open>>;

/** `fn` with a fresh partition map over emptied databases, closed afterwards. */
async function withMap(fn: (map: Map) => Promise<unknown>, options: { retries?: number } = {}) {
  await reset();
  const map = await r.open(options);
  try {
    await fn(map);
  } finally {
    map.close();
  }
}

/** A router whose every database is a closed port: nothing answers. */
function unreachable() {
  const client = new PrismaClient({
    adapter: new PrismaPg({
      connectionString: "postgresql://postgres@127.0.0.1:1/none",
      connectionTimeoutMillis: 1000,
    }),
  });
  return createShardRegistry({ shards: [{ shard: S.g0m0, client }] });
}

/** `moveShard` of 0/1 to e (with `options`) on a fresh map. */
/**
 * A live move of 0/1 to e between the logical-replication servers (`moveUrls`), by a router of its
 * own, with the options `extra` gives (it is handed that router).
 */
async function liveMoveToE(
  extra: (moving: ReturnType<typeof router>) => Partial<Parameters<typeof moveShard>[0]>,
) {
  const urls = inject("moveUrls");
  await reset(urls);
  const moving = router(urls);
  const map = await moving.open();
  try {
    return await moveShard({
      map,
      shard: S.g0m1,
      to: moving.databases.e,
      sourceConnection: urls.a,
      onProgress: () => {},
      ...extra(moving),
    });
  } finally {
    map.close();
    await moving.close();
  }
}

const moveToE = (options: Partial<Parameters<typeof moveShard>[0]>) =>
  withMap((map) => moveShard({ map, shard: S.g0m1, to: r.databases.e, onProgress: () => {}, ...options }));

/** Spoils e's copy of 0/1 as only a mover could (past e's fence). */
const spoil = () =>
  r.clients.e.$transaction(async (tx) => {
    await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
    await tx.$executeRawUnsafe(
      `INSERT INTO "Bucket" (id, name, remaining) VALUES ($1::uuid, 'extra', 1)`,
      ShardedId.generate("Bucket", S.g0m1),
    );
  });

const byCode: ErrorTable<errors.OwnershipErrorCode> = {
  STALE_OWNER: [
    errors.StaleOwnerError,
    () =>
      withMap(
        async (map) => {
          await (await ShardLease.take(map, S.g1m0, r.databases.e)).fence();
          await r.db.bucket.create({
            data: { id: ShardedId.generate("Bucket", S.g1m0), name: "x", remaining: 1 },
          });
        },
        { retries: 0 },
      ),
  ],
  INVALID_MAP: [
    errors.InvalidMapError,
    () =>
      withMap(async (map) => {
        await r.clients.b.$executeRawUnsafe(
          `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'owned')`,
        );
        await map.refresh();
        await r.db.bucket.findUnique({ where: { id: ShardedId.generate("Bucket", S.g0m0) } });
      }),
  ],
  EPOCH_CONFLICT: [
    errors.EpochConflictError,
    () => withMap(async (map) => (await ShardLease.take(map, S.g0m1, r.databases.e)).switch()),
  ],
  INVALID_OWNERSHIP_OPTIONS: [
    errors.OwnershipOptionsError,
    () => PartitionMap.open({ registry: r.registry, tables: [] }),
  ],
  NO_ANSWER: [
    errors.DatabasesUnansweredError,
    () =>
      PartitionMap.open({
        registry: unreachable(),
        tables: [{ table: "Bucket", column: "id" }],
        timeoutMs: 2000,
      }),
  ],
  MOVE_IN_PROGRESS: [
    errors.MoveInProgressError,
    () =>
      withMap(async (map) => {
        await ShardLease.take(map, S.g0m1, r.databases.e);
        await ShardLease.take(map, S.g0m1, r.databases.b);
      }),
  ],
  MOVE_LEASE_LOST: [
    errors.MoveLeaseLostError,
    () =>
      withMap(async (map) => {
        const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
        await lease.fence();
        await lease.lapse(); // as a mover that died: its fence is given back by the next refused write
        await r.db.bucket.create({
          data: { id: ShardedId.generate("Bucket", S.g0m1), name: "x", remaining: 1 },
        });
        await lease.receive();
      }),
  ],
  MOVE_FAILED: [
    errors.MoveFailedError,
    () =>
      moveToE({
        mode: "offline",
        afterStep: (step) => {
          if (step === "receive") throw new Error("the mover's host went away");
        },
      }),
  ],
  MOVE_PRECHECK: [
    errors.MovePrecheckError,
    // The machine's own server runs with wal_level = replica: no live move from it.
    () => moveToE({ sourceConnection: "postgresql://x" }),
  ],
  MOVE_TIMEOUT: [
    errors.MoveTimeoutError,
    // Given 1 ms for its copy (and for each of its phases outside the freeze: its checks time out
    // first, and nothing is changed).
    () => liveMoveToE(() => ({ copyTimeoutMs: 1 })),
  ],
  MOVE_OBJECT_GONE: [
    errors.MoveObjectGoneError,
    async () => {
      // Its subscription dropped by an operator by hand after it is made: the move stops at once,
      // undone, its MoveFailedError's cause naming what is gone.
      const failure = await liveMoveToE((moving) => ({
        afterStep: async (step) => {
          if (step !== "subscribe") return;
          const [sub] = await moving.clients.e.$queryRawUnsafe<{ name: string }[]>(
            "SELECT subname::text AS name FROM pg_subscription WHERE subname LIKE 'shardkit_move_%'",
          );
          await moving.clients.e.$executeRawUnsafe(`DROP SUBSCRIPTION "${sub!.name}"`);
        },
      })).catch((e: unknown) => e);
      throw failure instanceof errors.MoveFailedError ? failure.cause : failure;
    },
  ],
  BALANCE_INPUT: [
    errors.BalanceInputError,
    () =>
      planBalance(
        { "0/1": { load: -1 } },
        { databases: [{ name: "a" }], shards: [{ shard: "0/1", database: "a" }] },
      ),
  ],
  BALANCE_LEASE_HELD: [
    errors.BalanceLeaseHeldError,
    async () => {
      // Another run's lease, live for a minute: a second run is refused.
      await reset();
      const held = await BalanceLease.take(r.registry, "balance", {
        leaseMs: 60_000,
        timeoutMs: patient(10_000),
      });
      try {
        await runBalance({ registry: r.registry, tables: TABLES, mode: "offline" });
      } finally {
        await held.release();
      }
    },
  ],
  PLACEMENT_RULE: [
    errors.PlacementRuleError,
    async () => {
      // Group 0 may live only in the eu region; e is in the us one.
      await reset();
      const registry = createShardRegistry({
        shards: [{ shard: S.g0m1, client: r.clients.a }],
        databases: [
          { client: r.clients.a, name: "a", labels: { region: "eu" } },
          { client: r.clients.e, name: "e", labels: { region: "us" } },
        ],
        placement: [{ groups: 0, labels: { region: "eu" } }],
      });
      const map = await PartitionMap.open({ registry, tables: TABLES });
      try {
        const e = registry.databases.find((d) => d.name === "e")!;
        await moveShard({ map, shard: S.g0m1, to: e, mode: "offline", onProgress: () => {} });
      } finally {
        map.close();
      }
    },
  ],
  MOVE_VERIFY: [
    errors.MoveVerifyError,
    () =>
      moveToE({
        mode: "offline",
        afterStep: async (step) => {
          if (step === "copy") await spoil();
        },
      }),
  ],
};

describeErrorRules(errors, byCode, import.meta.url);
