import { PrismaPg } from "@prisma/adapter-pg";
import type { ShardIdentifier } from "@shardkit/id";
import { afterAll, inject } from "vitest";
import { PartitionMap, type PartitionMapOptions } from "../src/index.js";
import { shardOfRowSql } from "../src/sql.js";
import { PrismaClient } from "./generated/prisma/client.js";
import { models, routerOver, S, TABLES } from "./layout.js";

export { models, S, TABLES };

/** A router over the test databases (see `routerOver`), with its partition map's opener. */
export function router(urls: { a: string; b: string; e: string } = inject("ownershipUrls")) {
  const r = routerOver(urls);
  return {
    ...r,
    open: (options: Partial<PartitionMapOptions<PrismaClient>> = {}) =>
      PartitionMap.open({ registry: r.registry, tables: TABLES, ...options }),
    close: () => r.registry.disconnect(),
  };
}

type Urls = { a: string; b: string; e: string };

/**
 * A test file's way to make routers: `make(urls?)` returns a new router (service instance) on `urls`
 * (default `defaults`); every one made is closed after the file's tests.
 */
export function routers(defaults: Urls = inject("ownershipUrls")) {
  const made: ReturnType<typeof router>[] = [];
  afterAll(async () => {
    for (const r of made) await r.close();
  });
  return (urls: Urls = defaults) => {
    const r = router(urls);
    made.push(r);
    return r;
  };
}

/** Empties every table of every test database, the ownership records and fences included. */
export async function reset(urls: { a: string; b: string; e: string } = inject("ownershipUrls")) {
  for (const url of Object.values(urls)) {
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
    await client.$executeRawUnsafe(
      'TRUNCATE "Bucket", "Confirmation", "OutboxEvent", "IdempotencyKey", "ProcessedEvent", "UniqueClaim", "ShardOwnership", "ShardMove"',
    );
    for (const table of [...TABLES.map((t) => t.table), "UniqueClaim"]) {
      for (const t of ["ins", "upd", "del"]) {
        await client.$executeRawUnsafe(`DROP TRIGGER IF EXISTS shardkit_fence_${t} ON "${table}"`);
      }
    }
    await client.$disconnect();
  }
}

/**
 * What a caller of the manual transfer does between fence and switch: copies every row of `shard`
 * from one database to another, table by table, as the mover (past the target's fence).
 */
export async function copyShard(
  map: PartitionMap<PrismaClient>,
  shard: ShardIdentifier,
  from: PrismaClient,
  to: Parameters<PartitionMap<PrismaClient>["asMover"]>[0],
) {
  await map.asMover(to, async (tx) => {
    for (const table of map.tables) {
      const bits = shardOfRowSql(table);
      const rows = await from.$queryRawUnsafe<{ row: string }[]>(
        `SELECT row_to_json(t)::text AS row FROM "${table.table}" t WHERE ${bits} = $1`,
        shard.bits,
      );
      for (const { row } of rows) {
        await tx.$executeRawUnsafe(
          `INSERT INTO "${table.table}" SELECT * FROM json_populate_record(NULL::"${table.table}", $1::json)`,
          row,
        );
      }
    }
  });
}
