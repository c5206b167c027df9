import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { shardRegistryFromConfig } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, MAIN_PORT } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { routedClient, S, TABLES } from "../test/layout.js";
import { checkMove } from "./check.js";
import { PlacementRuleError } from "./errors.js";
import { PartitionMap } from "./map.js";
import { moveShard } from "./move.js";

// Placement rules on real PostgreSQL: eu holds 0/0, 0/1 (no rule) and 1/0 (group 1: region eu
// only); us is a spare in region us. Databases of this file's own (pl_...).
const NAMES = { eu: `pl_rules_eu_${process.pid}`, us: `pl_rules_us_${process.pid}` };
const urls = { eu: "", us: "" };
const config = () => ({
  shards: [
    { group: 0, member: 0, url: urls.eu, pool: 2, labels: { region: "eu" } },
    { group: 0, member: 1, url: urls.eu, pool: 2 },
    { group: 1, member: 0, url: urls.eu, pool: 2 },
  ],
  databases: [{ url: urls.us, pool: 2, labels: { region: "us" } }],
  placement: [{ groups: [1], labels: { region: "eu" } }],
});

let registry: ReturnType<typeof open>;
const open = () =>
  shardRegistryFromConfig(config(), {
    createClient: (url, _shards, { pool }) =>
      new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: pool }) }),
  });

beforeAll(async () => {
  urls.eu = await createDatabase(MAIN_PORT, NAMES.eu);
  urls.us = await createDatabase(MAIN_PORT, NAMES.us);
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: Object.entries(urls).map(([name, url]) => ({
      name,
      adapter: new PrismaPg({ connectionString: url }),
    })),
    onProgress: () => {},
  });
  registry = open();
  const db = routedClient(registry);
  for (const shard of [S.g0m1, S.g1m0])
    for (let i = 0; i < 5; i++)
      await db.bucket.create({
        data: { id: ShardedId.generate("Bucket", shard), name: `b${i}`, remaining: i },
      });
});

afterAll(async () => {
  await registry?.disconnect();
  await dropDatabase(MAIN_PORT, NAMES.eu);
  await dropDatabase(MAIN_PORT, NAMES.us);
});

/** Everything a move could change, in both databases: ownership records, move records, rows. */
async function snapshot() {
  const out: Record<string, unknown> = {};
  for (const d of registry.databases) {
    const c = d.client;
    out[d.name] = {
      ownership: await c.$queryRawUnsafe(
        `SELECT shard, epoch, state, peer FROM "ShardOwnership" ORDER BY shard`,
      ),
      moves: await c.$queryRawUnsafe(`SELECT count(*)::int AS n FROM "ShardMove"`),
      buckets: await c.$queryRawUnsafe(`SELECT id::text, name, remaining FROM "Bucket" ORDER BY id`),
      subscriptions: await c.$queryRawUnsafe(
        `SELECT count(*)::int AS n FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      ),
    };
  }
  return out;
}

describe("placement rules refuse a move before anything changes", () => {
  it("moveShard of a group-1 shard to the us database: PlacementRuleError naming the rule; records and rows as before", async () => {
    const map = await PartitionMap.open({ registry, tables: TABLES });
    try {
      const us = registry.databases.find((d) => d.labels.region === "us")!;
      const before = await snapshot();
      const steps: string[] = [];
      const error = await moveShard({
        map,
        shard: S.g1m0,
        to: us,
        mode: "offline",
        onProgress: (p) => steps.push(p.step),
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PlacementRuleError);
      const refused = error as PlacementRuleError;
      expect(refused.code).toBe("PLACEMENT_RULE");
      expect(refused.rule).toBe(
        `placement[0]: group 1 may live only on region=eu; database "${us.name}" has region=us`,
      );
      expect(refused.message).toBe(
        `shard 1/0 may not move to ${us.name}: placement[0]: group 1 may live only on region=eu; database "${us.name}" has region=us (nothing was changed)`,
      );
      expect(steps).toEqual([]);
      expect(await snapshot()).toEqual(before);
      expect(map.registry.databaseOf(S.g1m0).labels).toEqual({ region: "eu" });

      // Its dry run says the same, and changes nothing either.
      const check = await checkMove({ registry, shard: S.g1m0, to: us, mode: "offline", tables: TABLES });
      expect(check.issues).toContain(
        `${us.name} may not hold shard 1/0: placement[0]: group 1 may live only on region=eu; database "${us.name}" has region=us`,
      );
      expect(await snapshot()).toEqual(before);

      // A shard of a group without a rule moves there as before.
      const clean = await checkMove({ registry, shard: S.g0m1, to: us, mode: "offline", tables: TABLES });
      expect(clean.issues).toEqual([]);
      const moved = await moveShard({ map, shard: S.g0m1, to: us, mode: "offline", onProgress: () => {} });
      expect(moved).toMatchObject({ shard: "0/1", to: us.name, rows: { Bucket: 5 } });
    } finally {
      map.close();
    }
  });

  it("a shard configured where its rule forbids is no configuration error: the registry opens and routes it", () => {
    const misplaced = { ...config(), placement: [{ groups: [0], labels: { region: "us" } }] };
    const other = shardRegistryFromConfig(misplaced, {
      createClient: () => ({ $disconnect: async () => {} }),
    });
    const shard = S.g0m0;
    expect(other.placement.allows(shard, other.databaseOf(shard))).toMatch(
      /^placement\[0\]: group 0 may live only on region=us; database ".*pl_rules_eu_\d+" has region=eu$/,
    );
  });
});
