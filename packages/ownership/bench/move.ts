// pnpm bench (in packages/ownership): a live move under load. Writers insert confirmations at
// 500 writes/s (open loop, on localhost), half to the shard that moves and half to another shard,
// for a baseline phase and then while the shard moves from one PostgreSQL server to another
// (logical replication), driven by a mover process of its own (test/mover.ts), as `shardkit move`
// is. Reported: latency of each shard's writes in both phases (p50, p99,
// max), the move's write freeze, and the ledger check: every acknowledged write is at its
// shard's owner exactly once.
//
// BENCH_SECONDS (default 4): length of each phase. BENCH_ROWS (default 5000): rows of the moving
// shard before the move.

import { spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster } from "@shardkit/test-db";
import { type MoveResult, PartitionMap } from "../src/index.js";
import { LOGICAL } from "../test/global-setup.js";
import { routerOver, S, TABLES } from "../test/layout.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROWS = Number(process.env.BENCH_ROWS ?? 5000);
const RATE = 500; // writes per second, both shards together

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
// learns of the move when refused.
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
  const moving = ShardedId.generate("Bucket", S.g0m1);
  const other = ShardedId.generate("Bucket", S.g0m0);
  for (const id of [moving, other]) await r.db.bucket.create({ data: { id, name: "b", remaining: 0 } });
  const rows = Array.from({ length: ROWS }, () => ({
    id: ShardedId.colocatedWith("Confirmation", moving) as string,
    bucketId: moving,
    desk: "seed",
  }));
  for (let i = 0; i < rows.length; i += 1000) {
    await r.db.$transactionOn(S.g0m1, (tx) => tx.confirmation.createMany({ data: rows.slice(i, i + 1000) }));
  }

  const acked = new Set<string>();
  let failed = 0;
  /** Open-loop load for `ms`: a write every 1000 / RATE ms, alternating shards; latencies per shard. */
  async function load(ms: number, during?: () => Promise<void>) {
    const latencies: Record<string, number[]> = { moving: [], other: [] };
    const inFlight: Promise<void>[] = [];
    const end = performance.now() + ms;
    const work = during?.();
    for (let i = 0; performance.now() < end; i++) {
      const [label, bucketId] = i % 2 === 0 ? (["moving", moving] as const) : (["other", other] as const);
      const id = ShardedId.colocatedWith("Confirmation", bucketId) as string;
      const issued = performance.now();
      inFlight.push(
        r.db.confirmation
          .create({ data: { id, bucketId, desk: "load" } })
          .then(() => {
            acked.add(id);
            latencies[label]!.push(performance.now() - issued);
          })
          .catch(() => {
            failed++;
          }),
      );
      const next = issued + 1000 / RATE;
      while (performance.now() < next) await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(inFlight);
    await work;
    return latencies;
  }
  const stats = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    return `p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms (${xs.length} writes)`;
  };

  const mover = await startMover();
  const baseline = await load(SECONDS * 1000);
  let result: MoveResult | undefined;
  const during = await load(SECONDS * 1000, async () => {
    await new Promise((resolve) => setTimeout(resolve, 500));
    result = await mover.move();
  });
  console.log(`baseline, moving shard: ${stats(baseline.moving!)}`);
  console.log(`baseline, other shard:  ${stats(baseline.other!)}`);
  console.log(`during the move, moving shard: ${stats(during.moving!)}`);
  console.log(`during the move, other shard:  ${stats(during.other!)}`);
  const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(0.99 * xs.length)]!;
  console.log(
    `other shard p99, during vs baseline: ${(p99(during.other!) / p99(baseline.other!)).toFixed(2)}x`,
  );
  console.log(
    `move: ${result!.durationMs} ms in all, writes to the moving shard held ${result!.freezeMs} ms (fence to switch), ${ROWS + 1} rows of Confirmation+Bucket copied`,
  );
  console.log(`steps: ${result!.steps.map((s) => `${s.step} ${s.ms}`).join(", ")}`);
  // The ledger: every acknowledged write at its shard's owner, exactly once.
  const at = new Set([
    ...(await r.clients.e.confirmation.findMany({ select: { id: true } })).map((c) => c.id),
    ...(await r.clients.a.confirmation.findMany({ select: { id: true } })).map((c) => c.id),
  ]);
  const lost = [...acked].filter((id) => !at.has(id)).length;
  const total = (await r.clients.e.confirmation.count()) + (await r.clients.a.confirmation.count());
  console.log(
    `ledger: ${acked.size} writes acknowledged, ${lost} lost, ${total - ROWS - acked.size} applied twice or unacknowledged, ${failed} failed`,
  );
  map.close();

  /** Starts test/mover.ts (0/1 from a to e); once it is ready, `move()` runs the move and returns its result. */
  async function startMover(): Promise<{ move(): Promise<MoveResult> }> {
    const child = spawn(process.execPath, ["--import", "tsx", "test/mover.ts"], {
      cwd: new URL("..", import.meta.url).pathname,
      env: { ...process.env, MOVE_URLS: JSON.stringify(urls), STOP_AFTER: "" },
      stdio: ["pipe", "pipe", "inherit"],
    });
    let output = "";
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (output.startsWith("ready\n")) resolve();
      });
      void exited.then((code) => reject(new Error(`the mover exited with ${code} before it was ready`)));
    });
    return {
      async move() {
        child.stdin.write("go\n");
        const code = await exited;
        if (code !== 0) throw new Error(`the mover exited with ${code}: ${output}`);
        return JSON.parse(output.slice("ready\n".length)) as MoveResult;
      },
    };
  }
}
