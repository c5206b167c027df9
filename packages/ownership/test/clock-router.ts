// One router process for the clock tests: a service instance whose wall clock is whatever the parent
// made it (libfaketime through LD_PRELOAD and FAKETIME: Date.now, the load windows' stamps and the
// IDs it generates are all off). It writes CLOCK_ROUTER's buckets through the shardkit extension,
// load recording on, one create after another (each a transaction of its own on its shard's
// database), flushes its load windows once (the timer's interval is longer than its life), waits for
// the flush's rollup, and prints one JSON line: its router id, its clock, each flush's outcome.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "@shardkit/prisma";
import { PrismaClient } from "./generated/prisma/client.js";
import { models } from "./layout.js";

const { databases, writes } = JSON.parse(process.env.CLOCK_ROUTER!) as {
  /** Each database: its name, URL and the shard keys it holds. */
  databases: { name: string; url: string; shards: string[] }[];
  /** Shard key and how many buckets to create on it, in order. */
  writes: [string, number][];
};
const clients = databases.map(
  (d) => new PrismaClient({ adapter: new PrismaPg({ connectionString: d.url, max: 2 }) }),
);
const registry = createShardRegistry({
  shards: databases.flatMap((d, i) => d.shards.map((shard) => ({ shard, client: clients[i]! }))),
  databases: databases.map((d, i) => ({ client: clients[i]!, name: d.name })),
});
const db = clients[0]!.$extends(shardRouting({ registry, models, load: { intervalMs: 600_000 } }));
for (const [key, n] of writes) {
  const shard = ShardIdentifier.parse(key);
  for (let i = 0; i < n; i++)
    await db.bucket.create({
      data: { id: ShardedId.generate("Bucket", shard), name: `b${i}`, remaining: 1 },
    });
}
const load = db.$shardLoad()!;
const flushed = await load.flush();
await load.idle();
process.stdout.write(
  `${JSON.stringify({ router: load.router, clock: Date.now(), flushed: flushed.map((f) => [f.database, f.status]) })}\n`,
);
await registry.disconnect();
