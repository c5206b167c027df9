import { isShardkitError as isAnyShardkitError, ShardedId, ShardkitError } from "@shardkit/id";
import { describeErrorRules } from "@shardkit/vitest-config/errors";
import { afterAll } from "vitest";
import { reset, router, S } from "../test/world.js";
import {
  EpochConflictError,
  InvalidMapError,
  isShardkitError,
  OwnershipError,
  type OwnershipErrorCode,
  OwnershipOptionsError,
  StaleOwnerError,
} from "./errors.js";
import { PartitionMap } from "./map.js";

// Every code of @shardkit/ownership, raised through the public API on real PostgreSQL.
const r = router();
afterAll(() => r.close());

const byCode: Record<OwnershipErrorCode, [cls: { prototype: Error; name: string }, trigger: () => unknown]> =
  {
    STALE_OWNER: [
      StaleOwnerError,
      async () => {
        await reset();
        const map = await r.open({ retries: 0 });
        try {
          await map.fence(S.g1m0);
          await r.db.bucket.create({
            data: { id: ShardedId.generate("Bucket", S.g1m0), name: "x", remaining: 1 },
          });
        } finally {
          map.close();
        }
      },
    ],
    INVALID_MAP: [
      InvalidMapError,
      async () => {
        await reset();
        const map = await r.open();
        try {
          await r.clients.b.$executeRawUnsafe(
            `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'owned')`,
          );
          await map.refresh();
        } finally {
          map.close();
        }
      },
    ],
    EPOCH_CONFLICT: [
      EpochConflictError,
      async () => {
        await reset();
        const map = await r.open();
        try {
          await map.switch(S.g0m1, r.physical.e);
        } finally {
          map.close();
        }
      },
    ],
    INVALID_OWNERSHIP_OPTIONS: [
      OwnershipOptionsError,
      () => PartitionMap.open({ registry: r.registry, tables: [] }),
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
