import { PrismaPg } from "@prisma/adapter-pg";
import type { ShardIdentifier } from "@shardkit/id";
import type { Database } from "@shardkit/prisma";
import { DROP_LOAD_TABLES } from "@shardkit/prisma/internal";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterEach, inject } from "vitest";
import { type PartitionMap, ShardLease } from "../src/index.js";
import { shardOfRowSql } from "../src/sql.js";
import { PrismaClient } from "./generated/prisma/client.js";
import { models, routerOver, S, TABLES } from "./layout.js";

export { models, S, TABLES };

/** A router over the test databases (see `routerOver`), with its partition map's opener. */
export function router(urls: { a: string; b: string; e: string } = inject("ownershipUrls")) {
  const r = routerOver(urls);
  return { ...r, close: () => r.registry.disconnect() };
}

type Urls = { a: string; b: string; e: string };

/**
 * A test file's way to make routers: `make(urls?)` returns a new router (service instance) on `urls`
 * (default `defaults`); every one made in a test is closed after it (their connections with it).
 */
export function routers(defaults: Urls = inject("ownershipUrls")) {
  const made: ReturnType<typeof router>[] = [];
  afterEach(async () => {
    for (const r of made.splice(0)) await r.close();
  });
  return (urls: Urls = defaults) => {
    const r = router(urls);
    made.push(r);
    return r;
  };
}

/**
 * `reset`, and the load of earlier tests dropped too (`DROP_LOAD_TABLES`: windows, rollups, horizons): each test
 * records its own. Through a router `make` returns (closed after the test).
 */
export async function resetWithLoad(urls: Urls, make: (urls: Urls) => ReturnType<typeof router>) {
  await reset(urls);
  const r = make(urls);
  for (const client of Object.values(r.clients)) await client.$executeRawUnsafe(DROP_LOAD_TABLES);
}

/** Empties every table of every test database, the ownership records and fences included. */
export async function reset(urls: { a: string; b: string; e: string } = inject("ownershipUrls")) {
  // One client per database for the whole reset, each phase done on every database before the next.
  const clients = Object.values(urls).map(
    (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }),
  );
  try {
    // Moves' replication objects first (a subscription left by a test would keep copying rows in).
    // Each phase on every database at once, and done on all of them before the next.
    const eachClient = (work: (client: PrismaClient) => Promise<void>) => Promise.all(clients.map(work));
    await eachClient(async (client) => {
      const subscriptions = await client.$queryRawUnsafe<{ name: string }[]>(
        `SELECT subname::text AS name FROM pg_subscription
         WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND subname LIKE 'shardkit%'`,
      );
      for (const { name } of subscriptions) {
        await client.$executeRawUnsafe(`ALTER SUBSCRIPTION "${name}" DISABLE`);
        await client.$executeRawUnsafe(`ALTER SUBSCRIPTION "${name}" SET (slot_name = NONE)`);
        await client.$executeRawUnsafe(`DROP SUBSCRIPTION "${name}"`);
      }
    });
    await eachClient(async (client) => {
      await client.$queryRawUnsafe(
        `SELECT pg_terminate_backend(active_pid)::text FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL AND slot_name LIKE 'shardkit%'`,
      );
      // Waited for as long as the machine needs (a fixed 5 s was not enough on a loaded one: the drop
      // below then failed on a slot still active).
      await eventually("the moves' replication slots to be let go", async () => {
        const [left] = await client.$queryRawUnsafe<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM pg_replication_slots WHERE database = current_database() AND slot_name LIKE 'shardkit%' AND active`,
        );
        return left!.n === 0;
      });
      await client.$queryRawUnsafe(
        `SELECT pg_drop_replication_slot(slot_name)::text FROM pg_replication_slots WHERE database = current_database() AND slot_name LIKE 'shardkit%'`,
      );
      for (const { name } of await client.$queryRawUnsafe<{ name: string }[]>(
        `SELECT pubname::text AS name FROM pg_publication WHERE pubname LIKE 'shardkit%'`,
      ))
        await client.$executeRawUnsafe(`DROP PUBLICATION "${name}"`);
    });
    await eachClient(async (client) => {
      // The fence's triggers first: their TRUNCATE trigger refuses while a shard is being moved. Only
      // those there are (one statement to find them, rather than a DROP IF EXISTS of every possible one).
      const fenced = await client.$queryRawUnsafe<{ trigger: string; table: string }[]>(
        `SELECT t.tgname::text AS trigger, c.relname::text AS table FROM pg_trigger t
           JOIN pg_class c ON c.oid = t.tgrelid
         WHERE t.tgname = ANY($1::text[]) AND c.relname = ANY($2::text[]) AND pg_table_is_visible(c.oid)`,
        ["ins", "upd", "del", "trunc"].map((t) => `shardkit_fence_${t}`),
        [...TABLES.map((t) => t.table), "UniqueClaim", "UniqueClaimToken"],
      );
      for (const { trigger, table } of fenced)
        await client.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${trigger} ON "${table}"`);
      await client.$executeRawUnsafe(
        'TRUNCATE "Bucket", "Confirmation", "OutboxEvent", "IdempotencyKey", "ProcessedEvent", "UniqueClaim", "UniqueClaimToken", "ShardOwnership", "ShardMove", "ShardMoveChange"',
      );
    });
  } finally {
    for (const client of clients) await client.$disconnect();
  }
}

/**
 * What a caller of the manual transfer does between fence and switch: copies every row of the
 * lease's shard from its source to its target, table by table, as the mover (past the target's fence).
 */
export async function copyShard(map: PartitionMap<PrismaClient>, lease: ShardLease<PrismaClient>) {
  // Read first: a step at the target holds a transaction at the source (for the lease), and an
  // embedded database has one connection.
  const tables: { table: (typeof map.tables)[number]; rows: { row: string }[] }[] = [];
  for (const table of map.tables) {
    const bits = shardOfRowSql(table);
    const rows = await (lease.from.client as PrismaClient).$queryRawUnsafe<{ row: string }[]>(
      `SELECT row_to_json(t)::text AS row FROM "${table.table}" t WHERE ${bits} = $1`,
      lease.shard.bits,
    );
    tables.push({ table, rows });
  }
  await lease.copyIn(async (tx) => {
    for (const { table, rows } of tables) {
      for (const { row } of rows) {
        await tx.$executeRawUnsafe(
          `INSERT INTO "${table.table}" SELECT * FROM json_populate_record(NULL::"${table.table}", $1::json)`,
          row,
        );
      }
    }
  });
}

/**
 * A change of owner by hand, as a person at a terminal would make it with a lease: fence, receive,
 * copy, mark verified, switch, release (the old copy stays); returns the new epoch. `between` runs after the fence (a test's way
 * to act while the shard is fenced).
 */
export async function transfer(
  map: PartitionMap<PrismaClient>,
  shard: ShardIdentifier,
  to: Database<PrismaClient>,
  between?: () => Promise<void>,
): Promise<number> {
  const lease = await ShardLease.take(map, shard, to);
  await lease.fence();
  await between?.();
  await lease.receive();
  await copyShard(map, lease);
  await lease.verified();
  const { epoch } = await lease.switch();
  await lease.tidy();
  await lease.release();
  return epoch;
}
