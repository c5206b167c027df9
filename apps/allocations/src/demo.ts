// The demo (`demo` script): two desks, each its own service instance and router,
// confirm the units of bucket B-173 over HTTP while the shard holding it moves to a new database.
// One desk's router polls the partition map; the other never does and learns of the move when
// the old owner refuses it.
//
// By default the databases are embedded PGlite, and the move is offline (fence, copy, verify,
// switch: PGlite has no logical replication). With SHARDKIT_SHARDS (the service's configuration:
// shard 0/1 placed on a database, and a spare under `databases`), they are PostgreSQL and the move
// is live, on logical replication (the source's server needs wal_level = logical);
// SHARDKIT_MOVE_MODE=offline moves offline there too.
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { moveShard } from "@shardkit/ownership";
import { say } from "@shardkit/service-kit/demo";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { embeddedDatabases, openRouter, openServiceRouter, type Router } from "./shards.js";

const CAPACITY = 1000;
const SHARD = ShardIdentifier.of(0, 1);

/** The desks' and the mover's routers, the move's target and how to move there. */
interface Setup {
  open(poll: boolean): Promise<Router>;
  target: string;
  mode: "live" | "offline";
  sourceConnection?: string;
  close(): Promise<void>;
}

async function embedded(): Promise<Setup> {
  if (process.env.SHARDKIT_MOVE_MODE === "live") {
    throw new Error(
      "SHARDKIT_MOVE_MODE=live needs PostgreSQL (SHARDKIT_SHARDS): PGlite has no logical replication",
    );
  }
  say("opening 3 embedded PGlite databases in memory (db-a, db-b, db-new), the schema applied to each");
  const databases = await embeddedDatabases(
    [
      { name: "db-a", shards: [ShardIdentifier.of(0, 0), SHARD] },
      { name: "db-b", shards: [ShardIdentifier.of(1, 0)] },
      { name: "db-new", shards: [] },
    ],
    undefined,
    (event) => {
      if (event.type === "start" && event.applying)
        say(`  schema ${event.index + 1}/${event.total} ${event.target}: applying`);
    },
  );
  return {
    open: (poll) => openRouter(databases, { poll }),
    target: "db-new",
    mode: "offline",
    close: async () => {
      for (const d of databases) await d.pglite.close();
    },
  };
}

/**
 * PostgreSQL from SHARDKIT_SHARDS: shard 0/1 moves from the database holding it now to the first
 * spare that does not (run the demo again and it moves back).
 */
async function postgres(shardsJson: string): Promise<Setup> {
  const mode = process.env.SHARDKIT_MOVE_MODE ?? "live";
  if (mode !== "live" && mode !== "offline") {
    throw new Error(`SHARDKIT_MOVE_MODE: expected live or offline, got ${JSON.stringify(mode)}`);
  }
  const config = JSON.parse(shardsJson) as
    | { shards?: { group: number; member: number; url: string }[]; databases?: { url: string }[] }
    | { group: number; member: number; url: string }[];
  const shards = Array.isArray(config) ? config : (config.shards ?? []);
  const spares = Array.isArray(config) ? [] : (config.databases ?? []).map((d) => d.url);
  const placed = shards.find((s) => s.group === SHARD.group && s.member === SHARD.member);
  if (!placed) {
    throw new Error("SHARDKIT_SHARDS: the demo's bucket B-173 goes on shard 0/1, which it does not place");
  }
  const urls = [...shards.map((s) => s.url), ...spares];
  // A database's registry name is its URL with any password hidden.
  const urlOf = (name: string) =>
    urls.find((url) => url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@") === name)!;
  say("opening the PostgreSQL databases of SHARDKIT_SHARDS (schema lines on stderr)");
  const probe = await openServiceRouter({ shardsJson, dataDir: "/nonexistent", poll: false });
  const owner = probe.registry.databaseOf(SHARD).name;
  const target =
    probe.registry.databases.find((p) => spares.includes(urlOf(p.name)) && p.name !== owner)?.name ??
    probe.registry.databases.find((p) => p.name !== owner && urlOf(p.name) === placed.url)?.name;
  await probe.close();
  if (!target) throw new Error("SHARDKIT_SHARDS: list a spare database under `databases`: the move's target");
  return {
    open: (poll) => openServiceRouter({ shardsJson, dataDir: join(process.cwd(), ".data"), poll }),
    target,
    mode,
    sourceConnection: urlOf(owner),
    close: async () => {},
  };
}

const setup = process.env.SHARDKIT_SHARDS ? await postgres(process.env.SHARDKIT_SHARDS) : await embedded();
// Credentials: an operator's token makes the bucket; each desk confirms with its own. (A real
// deployment issues them where it authenticates people, with ALLOCATIONS_AUTH_SECRET.)
const auth = createAuth(process.env.ALLOCATIONS_AUTH_SECRET ?? randomBytes(32).toString("base64url"));
const operator = await auth.issue({ role: "admin", subject: "demo" });
say("opening two desks (each a service with a router of its own) and the mover's router");
const desks = await Promise.all(
  [
    { name: "desk one", poll: true },
    { name: "desk two", poll: false },
  ].map(async ({ name, poll }) => {
    const router = await setup.open(poll);
    const app = buildApp(new AllocationService(router), { auth });
    const base = await app.listen({ port: 0, host: "127.0.0.1" });
    return { name, router, app, base, token: await auth.issue({ role: "desk", desk: name }) };
  }),
);
const mover = await setup.open(false);

async function call(
  base: string,
  path: string,
  body: unknown,
  key: string = randomUUID(),
  token: string = operator,
) {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key, authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

const bucket = await call(desks[0]!.base, "/buckets", {
  name: "B-173",
  capacity: CAPACITY,
  shard: SHARD.key,
});
const bucketId = bucket.body.id!;
say(
  `bucket B-173 (${CAPACITY} units) on shard ${ShardedUUID.shardOf(bucketId).key}, in ${mover.registry.databaseOf(bucketId).name}`,
);

// Both desks confirm one unit at a time, each with its own keys, until B-173 is sold out. After the
// first 100, the mover moves its shard, while the desks go on.
const confirmed: { desk: string; key: string; id: string }[] = [];
const refused: Record<string, number> = {};
let started!: () => void;
const move = new Promise<void>((resolve) => {
  started = resolve;
}).then(() => {
  say(
    `moving shard ${SHARD.key} to ${setup.target} (${setup.mode}) while the desks go on (its steps on stderr)`,
  );
  return moveShard({
    map: mover.map,
    shard: SHARD,
    to: mover.database(setup.target),
    mode: setup.mode,
    ...(setup.sourceConnection ? { sourceConnection: setup.sourceConnection } : {}),
  });
});
say(`the desks confirm B-173's units one at a time; after the first 100, its shard moves`);
const work = desks.map(async (desk) => {
  for (let i = 0; ; i++) {
    const key = `${desk.name.replace(" ", "-")}-${i}`;
    const res = await call(
      desk.base,
      "/allocations/confirm",
      { bucket_id: bucketId, desk: desk.name },
      key,
      desk.token,
    );
    if (res.status === 201) {
      confirmed.push({ desk: desk.name, key, id: res.body.id! });
      if (confirmed.length % 250 === 0) say(`  ${confirmed.length} units confirmed`);
    } else refused[res.body.error!] = (refused[res.body.error!] ?? 0) + 1;
    if (res.body.error === "SOLD_OUT") return;
    if (confirmed.length >= 100) started();
  }
});
const [moved] = await Promise.all([move, ...work]);

await mover.map.refresh();
const owner = mover.registry.databaseOf(bucketId).name;
const rows = await mover.db.confirmation.count({ where: { bucketId } });
const ids = new Set(confirmed.map((c) => c.id));
say(
  `moved shard ${moved.shard} from ${moved.from} to ${moved.to} (epoch ${moved.epoch}, ${moved.mode}) while the desks confirmed: writes held ${moved.freezeMs} ms, ${moved.durationMs} ms in all`,
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
  desks.find((d) => d.name === winner.desk)!.token, // keys are each caller's own
);
say(
  `retrying ${winner.desk}'s first key: HTTP ${replay.status}, ${replay.body.id === winner.id ? "the recorded confirmation" : "a new decision"}`,
);

for (const desk of desks) {
  await desk.app.close();
  await desk.router.close();
}
await mover.close();
await setup.close();
