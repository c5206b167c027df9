import { isShardkitError as isAnyShardkitError, ShardedId, ShardkitError } from "@shardkit/id";
import { describeErrorRules } from "@shardkit/vitest-config/errors";
import { afterAll, inject } from "vitest";
import { reset, router, S } from "../test/world.js";
import {
  EpochConflictError,
  InvalidMapError,
  isShardkitError,
  MovePrecheckError,
  MoveTimeoutError,
  MoveVerifyError,
  OwnershipError,
  type OwnershipErrorCode,
  OwnershipOptionsError,
  StaleOwnerError,
} from "./errors.js";
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

const byCode: Record<OwnershipErrorCode, [cls: { prototype: Error; name: string }, trigger: () => unknown]> =
  {
    STALE_OWNER: [
      StaleOwnerError,
      () =>
        withMap(
          async (map) => {
            await map.fence(S.g1m0);
            await r.db.bucket.create({
              data: { id: ShardedId.generate("Bucket", S.g1m0), name: "x", remaining: 1 },
            });
          },
          { retries: 0 },
        ),
    ],
    INVALID_MAP: [
      InvalidMapError,
      () =>
        withMap(async (map) => {
          await r.clients.b.$executeRawUnsafe(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'owned')`,
          );
          await map.refresh();
        }),
    ],
    EPOCH_CONFLICT: [EpochConflictError, () => withMap((map) => map.switch(S.g0m1, r.physical.e))],
    INVALID_OWNERSHIP_OPTIONS: [
      OwnershipOptionsError,
      () => PartitionMap.open({ registry: r.registry, tables: [] }),
    ],
    MOVE_PRECHECK: [
      MovePrecheckError,
      // The machine's own server runs with wal_level = replica: no live move from it.
      () =>
        withMap((map) =>
          moveShard({
            map,
            shard: S.g0m1,
            to: r.physical.e,
            sourceConnection: "postgresql://x",
            onProgress: () => {},
          }),
        ),
    ],
    MOVE_TIMEOUT: [
      MoveTimeoutError,
      async () => {
        // A live move between the logical-replication servers, given 1 ms for its copy.
        const urls = inject("moveUrls");
        await reset(urls);
        const moving = router(urls);
        const map = await moving.open();
        try {
          await moveShard({
            map,
            shard: S.g0m1,
            to: moving.physical.e,
            sourceConnection: urls.a,
            timeoutMs: 1,
            onProgress: () => {},
          });
        } finally {
          map.close();
          await moving.close();
        }
      },
    ],
    MOVE_VERIFY: [
      MoveVerifyError,
      () =>
        withMap((map) =>
          moveShard({
            map,
            shard: S.g0m1,
            to: r.physical.e,
            mode: "offline",
            onProgress: () => {},
            afterStep: async (step) => {
              if (step !== "copy") return;
              await map.asMover(r.physical.e, (tx) =>
                tx.$executeRawUnsafe(
                  `INSERT INTO "Bucket" (id, name, remaining) VALUES ($1::uuid, 'extra', 1)`,
                  ShardedId.generate("Bucket", S.g0m1),
                ),
              );
            },
          }),
        ),
    ],
  };

describeErrorRules({
  byCode,
  base: OwnershipError,
  shardkitError: ShardkitError,
  guard: isShardkitError,
  anyGuard: isAnyShardkitError,
  sourceDir: new URL(".", import.meta.url).pathname,
  forbidden: /\bnew (?:Ownership|Type|Range|Syntax)?Error\(/,
});
