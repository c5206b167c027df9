// pnpm bench (in packages/ownership): how long a shard is without a writer when its mover dies
// inside its fence. A service (this process: a router whose map polls) writes to the shard every
// 10 ms; a mover process (test/mover.ts) moves the shard live and is SIGKILLed right after its
// fence. Nobody intervenes: the service's router gives the fenced shard back to its owner once the
// move's lease has lapsed. Reported, for each lease (BENCH_LEASES, default "10000,2000" ms): the
// time from the mover's death to the first write that succeeded after it, how many writes failed
// meanwhile (each waits up to the router's waitMs, 5 s), and the ledger of acknowledged writes.

import { spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster } from "@shardkit/test-db";
import { moveShard, PartitionMap } from "../src/index.js";
import { LOGICAL } from "../test/global-setup.js";
import { routerOver, S, TABLES } from "../test/layout.js";

const LEASES = (process.env.BENCH_LEASES ?? "10000,2000").split(",").map(Number);

await ensureCluster(LOGICAL.source.cluster, LOGICAL.source.port, { logical: true });
await ensureCluster(LOGICAL.target.cluster, LOGICAL.target.port, { logical: true });
for (const leaseMs of LEASES) {
  const dbs = [
    { key: "a" as const, port: LOGICAL.source.port, name: `sk_bench_heal_a_${process.pid}_${leaseMs}` },
    { key: "b" as const, port: LOGICAL.source.port, name: `sk_bench_heal_b_${process.pid}_${leaseMs}` },
    { key: "e" as const, port: LOGICAL.target.port, name: `sk_bench_heal_e_${process.pid}_${leaseMs}` },
  ];
  const urls = { a: "", b: "", e: "" };
  for (const db of dbs) urls[db.key] = await createDatabase(db.port, db.name);
  try {
    await rolloutSchema({
      schema: new URL("../test/schema.prisma", import.meta.url).pathname,
      targets: dbs.map((db) => ({
        name: db.name,
        adapter: new PrismaPg({ connectionString: urls[db.key] }),
      })),
      onProgress: () => {},
    });
    await once(leaseMs, urls);
  } finally {
    // The target first: its subscription keeps the source's slot in use.
    for (const db of [...dbs].reverse()) await dropDatabase(db.port, db.name);
  }
}

async function once(leaseMs: number, urls: { a: string; b: string; e: string }) {
  const r = routerOver(urls);
  const map = await PartitionMap.open({ registry: r.registry, tables: TABLES });
  map.start();
  const bucket = ShardedId.generate("Bucket", S.g0m1);
  await r.db.bucket.create({ data: { id: bucket, name: "b", remaining: 1_000_000 } });
  const done: { at: number; ok: boolean }[] = [];
  let writing = true;
  let acked = 0;
  const writer = (async () => {
    while (writing) {
      const ok = await r.db.bucket
        .update({ where: { id: bucket }, data: { remaining: { decrement: 1 } } })
        .then(() => true)
        .catch(() => false);
      if (ok) acked++;
      done.push({ at: performance.now(), ok });
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  const mover = spawn(process.execPath, ["--import", "tsx", "test/mover.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, MOVE_URLS: JSON.stringify(urls), STOP_AFTER: "fence", LEASE_MS: String(leaseMs) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let said = "";
  const died = new Promise<{ at: number; signal: NodeJS.Signals | null }>((resolve) =>
    mover.on("exit", (_code, signal) => resolve({ at: performance.now(), signal })),
  );
  await new Promise<void>((resolve) =>
    mover.stdout.on("data", (chunk: Buffer) => {
      said += chunk.toString();
      if (said.startsWith("ready\n")) resolve();
    }),
  );
  mover.stdin.write("go\n");
  const { at: deathAt, signal } = await died;
  if (signal !== "SIGKILL") throw new Error(`the mover did not stop after its fence: ${said}`);
  // Until a write issued after the death succeeds.
  while (!done.some((d) => d.ok && d.at > deathAt)) await new Promise((resolve) => setTimeout(resolve, 50));
  writing = false;
  await writer;
  const back = done.find((d) => d.ok && d.at > deathAt)!;
  const failed = done.filter((d) => !d.ok).length;
  const [row] = await r.clients.a.$queryRawUnsafe<{ remaining: number }[]>(
    `SELECT remaining FROM "Bucket" WHERE id = $1::uuid`,
    bucket,
  );
  // The next move takes the stopped one over (undoes it: it had not switched) and moves the shard.
  const next = await moveShard({
    map,
    shard: S.g0m1,
    to: r.databases.e,
    sourceConnection: urls.a,
    onProgress: () => {},
  });
  console.log(
    `lease ${leaseMs} ms: mover SIGKILLed after its fence; writes again ${((back.at - deathAt) / 1000).toFixed(2)} s later, with nobody intervening (heals ${map.counters.heals}); ${failed} writes failed meanwhile (each waited up to 5 s); ${acked} acknowledged, ${1_000_000 - row!.remaining} applied; the next move ${next.resumed} the stopped one and moved the shard (epoch ${next.epoch})`,
  );
  map.close();
  await r.registry.disconnect();
}
