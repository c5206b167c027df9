// pnpm bench (in packages/ownership): a live move of a large shard under load. Writers send an
// open-loop load (BENCH_RATE writes/s in all, half inserts and half updates) through one router (a
// service instance whose map polls), a third each to the shard that moves (0/1 on database a), to
// another shard of the same database (0/0) and to a shard of another database (1/0 on b): first
// for a baseline, then while 0/1 moves from a to e on another PostgreSQL server (logical
// replication), driven by a mover process of its own (test/mover.ts), as `shardkit move` is.
//
// Reported: the move's steps and its freeze (fence to switch: writes to the moving shard wait);
// each shard's write latency (p50, p99, max) in the baseline and during the move, and the ratio of
// the other shards' p99 during the move to their baseline (both measured in this run); the ledger:
// every acknowledged write is at its shard's owner exactly once.
//
// BENCH_ROWS (default 100000): rows of the moving shard (its confirmations). BENCH_SECONDS (default
// 5): the baseline's length. BENCH_RATE (default 150).

import { spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster } from "@shardkit/test-db";
import { type MoveResult, PartitionMap } from "../src/index.js";
import { LOGICAL } from "../test/global-setup.js";
import { routerOver, S, TABLES } from "../test/layout.js";
import { lineReader } from "../test/lines.js";

/** A ShardedUUID of the shard with these bits, made by SQL (for seeding in bulk). */
const idOf = (bits: number) =>
  `(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
    || lpad(to_hex((random() * 4095)::int), 3, '0') || to_hex(${0x8000 | bits})
    || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'))::uuid`;

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const RATE = Number(process.env.BENCH_RATE ?? 150);

await ensureCluster(LOGICAL.source.cluster, LOGICAL.source.port, { logical: true });
await ensureCluster(LOGICAL.target.cluster, LOGICAL.target.port, { logical: true });
const dbs = [
  { key: "a" as const, port: LOGICAL.source.port, name: `sk_bench_move_a_${process.pid}` },
  { key: "b" as const, port: LOGICAL.source.port, name: `sk_bench_move_b_${process.pid}` },
  { key: "e" as const, port: LOGICAL.target.port, name: `sk_bench_move_e_${process.pid}` },
];
const urls = { a: "", b: "", e: "" };
for (const db of dbs) urls[db.key] = await createDatabase(db.port, db.name);
// The service (writers) is this process; the mover is another, with its own router: the service
// learns of the move from its map's polling, or when refused.
const r = routerOver(urls);
try {
  await bench();
} finally {
  await r.registry.disconnect();
  for (const db of dbs) await dropDatabase(db.port, db.name);
}

async function bench() {
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: dbs.map((db) => ({ name: db.name, adapter: new PrismaPg({ connectionString: urls[db.key] }) })),
    onProgress: () => {},
  });
  const map = await PartitionMap.open({ registry: r.registry, tables: TABLES });
  map.start();
  const shards = [
    { label: "moving 0/1 (a)", shard: S.g0m1, client: r.clients.a, rows: ROWS },
    { label: "other 0/0 (a)", shard: S.g0m0, client: r.clients.a, rows: Math.ceil(ROWS / 4) },
    { label: "far 1/0 (b)", shard: S.g1m0, client: r.clients.b, rows: Math.ceil(ROWS / 4) },
  ];
  const buckets = new Map<string, string[]>();
  const seeding = performance.now();
  for (const s of shards) {
    const ids = Array.from({ length: 20 }, () => ShardedId.generate("Bucket", s.shard) as string);
    for (const id of ids) await r.db.bucket.create({ data: { id, name: "b", remaining: 1_000_000_000 } });
    buckets.set(s.label, ids);
    await s.client.$executeRawUnsafe(
      `INSERT INTO "Confirmation" (id, "bucketId", desk) SELECT ${idOf(s.shard.bits)}, $1::uuid, 'seed' FROM generate_series(1, $2)`,
      ids[0],
      s.rows,
    );
  }
  for (const db of ["a", "b"] as const)
    await r.clients[db].$executeRawUnsafe(`VACUUM ANALYZE "Confirmation"`);
  console.log(
    `seeded ${shards.map((s) => `${s.rows} rows of ${s.label}`).join(", ")} in ${((performance.now() - seeding) / 1000).toFixed(1)} s`,
  );

  const acked = new Set<string>();
  let failed = 0;
  const failures = new Map<string, number>();
  /** Open-loop load until `until()` is true: writes alternate shards and kinds; each write's start and latency. */
  async function load(until: () => boolean) {
    const writes: { label: string; at: number; ms: number }[] = [];
    const inFlight: Promise<void>[] = [];
    for (let i = 0; !until(); i++) {
      const s = shards[i % 3]!;
      const ids = buckets.get(s.label)!;
      const issued = performance.now();
      const bucketId = ids[Math.floor(i / 3) % ids.length]!;
      const id = ShardedId.colocatedWith("Confirmation", bucketId) as string;
      const write =
        Math.floor(i / 3) % 2 === 0
          ? r.db.confirmation.create({ data: { id, bucketId, desk: "load" } }).then(() => void acked.add(id))
          : r.db.bucket
              .update({ where: { id: bucketId }, data: { remaining: { decrement: 1 } } })
              .then(() => {});
      inFlight.push(
        write.then(
          () => void writes.push({ label: s.label, at: issued, ms: performance.now() - issued }),
          (error: unknown) => {
            failed++;
            const code = String((error as { code?: unknown }).code ?? (error as Error).message).slice(0, 60);
            failures.set(code, (failures.get(code) ?? 0) + 1);
          },
        ),
      );
      const next = issued + 1000 / RATE;
      while (performance.now() < next) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await Promise.all(inFlight);
    return writes;
  }
  const stats = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const at = (q: number) =>
      sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
    return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? Number.NaN, n: xs.length };
  };
  const show = (x: ReturnType<typeof stats>) =>
    `p50 ${x.p50.toFixed(1)} ms, p99 ${x.p99.toFixed(1)} ms, max ${x.max.toFixed(1)} ms (${x.n} writes)`;

  const mover = spawn(process.execPath, ["--import", "tsx", "test/mover.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, MOVE_URLS: JSON.stringify(urls) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const next = lineReader(mover, "mover", 3_600_000);
  if ((await next()) !== "ready") throw new Error("the mover did not start");
  const baselineEnd = performance.now() + SECONDS * 1000;
  const baseline = await load(() => performance.now() > baselineEnd);
  let outcome: { ok: boolean; result?: MoveResult; message?: string } | undefined;
  mover.stdin!.write("go\n");
  const moving = next().then((line) => {
    outcome = JSON.parse(line) as typeof outcome;
  });
  const moveStarted = performance.now();
  const during = await load(() => outcome !== undefined);
  await moving;
  mover.stdin!.end();
  if (!outcome?.ok) throw new Error(`the move failed: ${outcome?.message}`);
  const result = outcome.result!;

  console.log(
    `move: ${(result.durationMs / 1000).toFixed(1)} s, writes to the moving shard held ${result.freezeMs} ms (fence to switch), ${result.changedRows} rows written during the move checked inside the fence`,
  );
  console.log(`steps (ms): ${result.steps.map((s) => `${s.step} ${s.ms}`).join(", ")}`);
  for (const s of shards) {
    const base = stats(baseline.filter((w) => w.label === s.label).map((w) => w.ms));
    const dur = stats(during.filter((w) => w.label === s.label).map((w) => w.ms));
    console.log(`${s.label}: baseline ${show(base)}`);
    console.log(
      `${" ".repeat(s.label.length)}  during   ${show(dur)}  (p99 ${(dur.p99 / base.p99).toFixed(2)}x baseline)`,
    );
  }
  // Per step: the other shards' worst latency among writes that started while it ran.
  let t = moveStarted;
  const bySteps = result.steps.map((s) => {
    const [from, to] = [t, t + s.ms];
    t = to;
    const others = during
      .filter((w) => w.label !== shards[0]!.label && w.at >= from && w.at < to)
      .map((w) => w.ms);
    return `${s.step} ${others.length ? stats(others).max.toFixed(0) : "-"}`;
  });
  console.log(`other shards' worst write (ms) by the step it started in: ${bySteps.join(", ")}`);
  // The ledger: every acknowledged insert at its shard's owner, exactly once.
  const at = [
    ...(await r.clients.e.$queryRawUnsafe<{ id: string }[]>(
      `SELECT id::text FROM "Confirmation" WHERE desk = 'load'`,
    )),
    ...(await r.clients.a.$queryRawUnsafe<{ id: string }[]>(
      `SELECT id::text FROM "Confirmation" WHERE desk = 'load'`,
    )),
    ...(await r.clients.b.$queryRawUnsafe<{ id: string }[]>(
      `SELECT id::text FROM "Confirmation" WHERE desk = 'load'`,
    )),
  ].map((row) => row.id);
  const present = new Set(at);
  const lost = [...acked].filter((id) => !present.has(id)).length;
  console.log(
    `ledger: ${acked.size} inserts acknowledged, ${lost} lost, ${at.length - present.size} applied twice, ${failed} writes failed${failed ? ` (${[...failures].map(([c, n]) => `${c}: ${n}`).join("; ")})` : ""}`,
  );
  map.close();
}
