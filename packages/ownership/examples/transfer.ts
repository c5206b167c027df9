import { PGlite } from "@electric-sql/pglite";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { checkMove, PartitionMap, readPartitionMap, refusalOf, ShardLease } from "@shardkit/ownership";
import { createShardRegistry, shardRouting } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/prisma/client.js";

// Two embedded databases: "old" holds shard 0/1 today, "new" is a spare that will own it.
const databases = { old: new PGlite(), new: new PGlite() };
await rolloutSchema({
  schema: new URL("./schema.prisma", import.meta.url).pathname,
  targets: Object.entries(databases).map(([name, pglite]) => ({ name, adapter: new PrismaPGlite(pglite) })),
  onProgress: () => {},
});
const shard = ShardIdentifier.of(0, 1);
const tables = [{ table: "Bucket", column: "id" }];
/** A router: its own clients, registry and partition map (a service instance). */
async function router() {
  const clients = {
    old: new PrismaClient({ adapter: new PrismaPGlite(databases.old) }),
    new: new PrismaClient({ adapter: new PrismaPGlite(databases.new) }),
  };
  const registry = createShardRegistry({
    shards: [{ shard, client: clients.old }],
    databases: [
      { client: clients.old, name: "old" },
      { client: clients.new, name: "new" },
    ],
  });
  const map = await PartitionMap.open({ registry, tables });
  const db = clients.old.$extends(shardRouting({ registry, models: { Bucket: { keys: ["id"] } } }));
  return {
    clients,
    registry,
    map,
    db,
    database: (name: string) => registry.databases.find((p) => p.name === name)!,
  };
}
const mover = await router();
const stale = await router(); // reads the map now and is never told of the move

const id = ShardedId.generate("Bucket", shard);
await mover.db.bucket.create({ data: { id, name: "B-173", remaining: 1 } });

// 0. The checks a move runs before it changes anything, on their own: no map needed, nothing changed.
const check = await checkMove({
  registry: mover.registry,
  shard,
  to: mover.database("new"),
  mode: "offline",
  tables,
});
console.log(`precheck of a move to "new": ${check.issues.length === 0 ? "ok" : check.issues.join("; ")}`);

// 1. A lease: one mover at a time changes the shard's owner, and every step below checks it. A
//    second mover is refused, naming this one.
const lease = await ShardLease.take(mover.map, shard, mover.database("new"));
const second = await ShardLease.take(stale.map, shard, stale.database("new")).catch((e) => e);
console.log(`a second mover: ${second.code}`);

// 2. Fence: the old owner refuses every write for the shard, whoever sends it.
await lease.fence();
const refused = await mover.clients.old.bucket
  .update({ where: { id }, data: { remaining: 0 } })
  .catch((e) => e);
console.log("a script writing to the old owner:", refusalOf(refused)?.state);

// 3. Copy the shard's rows as the mover (read first: an embedded database has one connection, and a
//    step at the target holds a transaction at the source for the lease), record the copy as
//    verified, switch (decided at the old owner, then the new one owns it), release the lease.
await lease.receive();
const rows = await mover.clients.old.bucket.findMany();
await lease.copyIn(async (tx) => {
  for (const row of rows) {
    await tx.$executeRawUnsafe(
      `INSERT INTO "Bucket" (id, name, remaining) VALUES ($1::uuid, $2, $3)`,
      row.id,
      row.name,
      row.remaining,
    );
  }
});
await lease.verified();
const { epoch } = await lease.switch();
await lease.release();
console.log(`shard ${shard.key} is owned by "new" at epoch ${epoch}`);

// 4. The stale router still sends the shard to "old": refused there, it refreshes and retries at "new".
const updated = await stale.db.bucket.update({ where: { id }, data: { remaining: 0 } });
console.log(
  `stale router's write: remaining ${updated.remaining} on "${stale.registry.databaseOf(shard).name}",`,
  `${stale.map.counters.staleRejections} refusal, ${stale.map.counters.retries} retry`,
);

// 5. What the databases record now, read without changing anything (as `shardkit status` reads it).
const read = (await readPartitionMap(mover.registry)).ownerOf(shard);
console.log(
  `owner "${read.owner?.name}" at epoch ${read.epoch}; records:`,
  read.records.map((r) => `${r.database} ${r.state}`).join(", "),
);
for (const r of [mover, stale]) r.map.close();
for (const pglite of Object.values(databases)) await pglite.close();
