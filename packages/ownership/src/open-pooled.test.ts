import { ShardIdentifier } from "@shardkit/id";
import { type OpenShards, type OpenShardsOptions, openShards } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, MAIN_PORT, patient, pgUrl } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { TABLES } from "../test/layout.js";
import { PartitionMap } from "./index.js";

// A service started by `openShards` opening its partition map: the open's questions and the map's
// statements go through each client's own pool, past Prisma's engine. Seen from both ends: the
// clients' engines (an engine starts by connecting its driver adapter: counted here) and the
// server (the sessions each database of this test's own was opened, pg_stat_database).
const names = [0, 1, 2].map((i) => `sk_own_pooled_${i}_${process.pid}`);
const schema = new URL("../test/schema.prisma", import.meta.url).pathname;
let shardsJson = "";

/** `fn` with a connection to the server's `postgres` database (not one of the test's). */
async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pgUrl(MAIN_PORT, "postgres") });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Per database of the test: client backends connected now, and sessions ever opened (pg_stat_database). */
function backends(): Promise<{ live: number[]; sessions: number[] }> {
  return admin(async (c) => {
    const { rows } = await c.query<{ name: string; live: number; sessions: string }>(
      `SELECT d.datname AS name, d.sessions::text AS sessions,
          (SELECT count(*)::int FROM pg_stat_activity a WHERE a.datname = d.datname AND a.backend_type = 'client backend') AS live
         FROM pg_stat_database d WHERE d.datname = ANY($1)`,
      [names],
    );
    const of = (name: string) => rows.find((r) => r.name === name)!;
    return { live: names.map((n) => of(n).live), sessions: names.map((n) => Number(of(n).sessions)) };
  });
}

/** Waits until no session of the test's is left: each one that ended has counted in `sessions`. */
async function closed(): Promise<{ live: number[]; sessions: number[] }> {
  let now = await backends();
  await eventually("the test databases' sessions to end", async () => {
    now = await backends();
    return now.live.every((n) => n === 0);
  });
  return now;
}

/** `openShards` over the test's databases, counting each client's engine starts (its adapter's connects). */
async function open(warm: boolean): Promise<{ opened: OpenShards<PrismaClient>; engines: number[] }> {
  const engines: number[] = [];
  const opened = await openShards({
    schema,
    shardsJson,
    warm,
    idleTimeoutMs: 600_000, // nothing idles out: every connection the open made is still there
    onState: () => {},
    onProgress: () => {},
    createClient: (adapter: Parameters<OpenShardsOptions<PrismaClient>["createClient"]>[0]) => {
      const i = engines.push(0) - 1;
      return new PrismaClient({
        adapter: {
          ...adapter,
          provider: adapter.provider,
          adapterName: adapter.adapterName,
          connect: () => {
            engines[i]!++;
            return adapter.connect();
          },
          connectToShadowDb: () => adapter.connectToShadowDb(),
        },
      });
    },
  });
  return { opened, engines };
}

beforeAll(async () => {
  const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
  shardsJson = JSON.stringify(urls.map((url, i) => ({ group: i, member: 0, url, pool: 4 })));
  // The schema pushed once (the schema engine's own connections), so the opens below find it.
  const first = await open(false);
  await first.opened.close();
  await closed();
}, patient(120_000));

afterAll(async () => {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
});

describe("opening a map over openShards' clients", () => {
  it(
    "starts no Prisma engine and opens one connection per database; the first call's engine takes that connection",
    async () => {
      const before = (await backends()).sessions;
      const { opened, engines } = await open(false);
      const map = await PartitionMap.open({ registry: opened.registry, tables: TABLES });
      try {
        expect(map.unanswered().size).toBe(0);
        expect(map.entries().map((e) => `${e.shard.key}@${e.epoch}`)).toEqual(["0/0@1", "1/0@1", "2/0@1"]);
        expect(engines).toEqual([0, 0, 0]);
        expect((await backends()).live).toEqual([1, 1, 1]);
        // A routed call starts its database's engine, on the connection the open left in the pool.
        const client = opened.registry.clientFor(ShardIdentifier.of(1, 0));
        await client.$queryRawUnsafe("SELECT shardkit_assert_owner(64, 1)");
        expect(engines).toEqual([0, 1, 0]);
        expect((await backends()).live).toEqual([1, 1, 1]);
        // The map's own check (a tick) and its announcement start no engine either.
        await map.refresh();
        await map.announce();
        expect(engines).toEqual([0, 1, 0]);
      } finally {
        map.close();
        await opened.close();
      }
      const after = await closed();
      expect(after.sessions.map((n, i) => n - before[i]!)).toEqual([1, 1, 1]);
    },
    patient(60_000),
  );

  it(
    "warmed (the default): the warm-up starts each engine on the connection the start-up questions opened, and the map's open adds none",
    async () => {
      const before = (await backends()).sessions;
      const { opened, engines } = await open(true);
      try {
        expect(engines).toEqual([1, 1, 1]);
        const map = await PartitionMap.open({ registry: opened.registry, tables: TABLES });
        map.close();
        expect(engines).toEqual([1, 1, 1]);
        expect((await backends()).live).toEqual([1, 1, 1]);
      } finally {
        await opened.close();
      }
      const after = await closed();
      expect(after.sessions.map((n, i) => n - before[i]!)).toEqual([1, 1, 1]);
    },
    patient(60_000),
  );
});
