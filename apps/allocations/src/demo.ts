// `pnpm --filter @shardkit/allocations demo`: two desks, each its own service instance and router,
// confirm the units of bucket B-173 over HTTP while the shard holding it moves to a new database.
// One desk's router polls the partition map; the other never does and learns of the move when
// the old owner refuses it. Embedded PGlite databases (an offline move: PGlite has no logical
// replication); the library's moveShard moves live between PostgreSQL servers.
import { randomUUID } from "node:crypto";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { moveShard } from "@shardkit/ownership";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { embeddedDatabases, openRouter } from "./shards.js";

const say = (line = "") => process.stdout.write(`${line}\n`);
const CAPACITY = 200;
const databases = await embeddedDatabases([
  { name: "db-a", shards: [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)] },
  { name: "db-b", shards: [ShardIdentifier.of(1, 0)] },
  { name: "db-new", shards: [] },
]);
const desks = await Promise.all(
  [
    { name: "desk one", poll: true },
    { name: "desk two", poll: false },
  ].map(async ({ name, poll }) => {
    const router = await openRouter(databases, { poll });
    const app = buildApp(new AllocationService(router));
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    return { name, router, app, base };
  }),
);
const mover = await openRouter(databases);

async function call(base: string, path: string, body: unknown, key: string = randomUUID()) {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

const bucket = await call(desks[0]!.base, "/buckets", { name: "B-173", capacity: CAPACITY, shard: "0/1" });
const bucketId = bucket.body.id!;
say(
  `bucket B-173 (${CAPACITY} units) on shard ${ShardedUUID.shardOf(bucketId).key}, in ${mover.registry.physicalOf(bucketId).name}`,
);

// Both desks confirm one unit at a time, each with its own keys, until B-173 is sold out.
const confirmed: { desk: string; key: string; id: string }[] = [];
const refused: Record<string, number> = {};
let moved: Awaited<ReturnType<typeof moveShard>> | undefined;
const work = desks.map(async (desk) => {
  for (let i = 0; ; i++) {
    const key = `${desk.name.replace(" ", "-")}-${i}`;
    const res = await call(desk.base, "/allocations/confirm", { bucket_id: bucketId, desk: desk.name }, key);
    if (res.status === 201) confirmed.push({ desk: desk.name, key, id: res.body.id! });
    else refused[res.body.error!] = (refused[res.body.error!] ?? 0) + 1;
    if (res.body.error === "SOLD_OUT") return;
    if (confirmed.length === 100 && !moved) {
      moved = await moveShard({
        map: mover.map,
        shard: ShardedUUID.shardOf(bucketId),
        to: mover.database("db-new"),
        mode: "offline",
        onProgress: () => {},
      });
    }
  }
});
await Promise.all(work);

const owner = mover.registry.physicalOf(bucketId).name;
const rows = await mover.db.confirmation.count({ where: { bucketId } });
const ids = new Set(confirmed.map((c) => c.id));
say(
  `moved shard ${moved!.shard} from ${moved!.from} to ${moved!.to} (epoch ${moved!.epoch}) while the desks confirmed: writes held ${moved!.freezeMs} ms`,
);
say(`confirmations: ${confirmed.length} answered, ${rows} recorded in ${owner} (capacity ${CAPACITY})`);
for (const desk of desks) say(`  ${desk.name}: ${confirmed.filter((c) => c.desk === desk.name).length}`);
say(`double decisions: ${rows - ids.size + Math.max(0, rows - CAPACITY)}`);
say(
  `refusals: ${Object.entries(refused)
    .map(([code, n]) => `${code} ${n}`)
    .join(", ")}`,
);
for (const desk of desks) {
  const c = desk.router.map.counters;
  say(
    `  ${desk.name}: ${c.staleRejections} stale-route rejections, ${c.retries} retries, ${c.refreshes} map refreshes`,
  );
}
const winner = confirmed[0]!;
const replay = await call(
  desks[1]!.base,
  "/allocations/confirm",
  { bucket_id: bucketId, desk: winner.desk },
  winner.key,
);
say(
  `retrying ${winner.desk}'s first key: HTTP ${replay.status}, ${replay.body.id === winner.id ? "the recorded confirmation" : "a new decision"}`,
);

for (const desk of desks) {
  await desk.app.close();
  await desk.router.close();
}
await mover.close();
for (const d of databases) await d.pglite.close();
