// The scale benches' fleet: N real PostgreSQL databases on the main server, each with the test
// schema, made from one template database (a schema push per database would take most of a run),
// and dropped at the end. Each logical shard lives on database `i % n`.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import { type OpenShardsOptions, openShards, rolloutSchema } from "../src/rollout.js";
import { PrismaClient } from "../test/generated/prisma/client.js";

export const SCHEMA = new URL("../test/schema.prisma", import.meta.url).pathname;

/**
 * `openShards` over a fleet (`json` of it, a pool of one connection per database: 64 databases stay
 * within the server's max_connections) with the test schema, `options` beside.
 */
export function openFleet(
  fleet: Pick<Fleet, "json">,
  options: Omit<OpenShardsOptions<PrismaClient>, "schema" | "shardsJson" | "createClient">,
) {
  return openShards({
    schema: SCHEMA,
    shardsJson: fleet.json(1),
    createClient: (adapter) => new PrismaClient({ adapter }),
    ...options,
  });
}

export interface Fleet {
  names: string[];
  urls: string[];
  /** The logical shards, `perDatabase` on each database (group `i >> 6`, member `i & 63`). */
  shards: ShardIdentifier[];
  /** The database index holding each shard of `shards`. */
  databaseOf: number[];
  /** `SHARDKIT_SHARDS` for the fleet (`pool` per database when given). */
  json(pool?: number): string;
  drop(): Promise<void>;
}

/** `n` databases named `sk_bench_<tag>_<pid>_<i>`, `perDatabase` logical shards on each, with `schema`. */
export async function makeFleet(n: number, tag: string, perDatabase = 16, schema = SCHEMA): Promise<Fleet> {
  await ensureCluster("main", MAIN_PORT);
  const base = `sk_bench_${tag}_${process.pid}`;
  const template = `${base}_tpl`;
  const templateUrl = await createDatabase(MAIN_PORT, template);
  await rolloutSchema({
    schema,
    targets: [{ name: template, adapter: new PrismaPg({ connectionString: templateUrl, max: 1 }) }],
    onProgress: () => {},
  });
  const names = Array.from({ length: n }, (_, i) => `${base}_${i}`);
  const urls: string[] = [];
  // CREATE DATABASE from one template takes its turn on the server: one at a time.
  for (const name of names) urls.push(await createDatabase(MAIN_PORT, name, { template }));
  await dropDatabase(MAIN_PORT, template);
  const shards = Array.from({ length: n * perDatabase }, (_, i) => ShardIdentifier.of(i >> 6, i & 63));
  const databaseOf = shards.map((_, i) => i % n);
  return {
    names,
    urls,
    shards,
    databaseOf,
    json: (pool) =>
      JSON.stringify(
        shards.map((s, i) => ({
          group: s.group,
          member: s.member,
          url: urls[databaseOf[i]!]!,
          ...(pool === undefined ? {} : { pool }),
        })),
      ),
    async drop() {
      for (const name of names) await dropDatabase(MAIN_PORT, name);
    },
  };
}
