// The first calls of a service on a fleet of cold databases: a new process (a service starting)
// runs `openShards` over 64 databases, then one routed `findUnique` per database, all at once (as
// the first requests of a service arrive), and reports the time until every one answered. Measured
// with the open's warming (`warm`, the default: each client runs one `SELECT 1` at open, 16 at a
// time) and without it (`warm: false`: each pool opens on its first call), alternately, ROUNDS
// times each in one run; the figure is the ratio of the medians. The open is reported apart. Run:
// `pnpm exec tsx bench/cold-calls.ts` in packages/prisma (BENCH_DATABASES=64, BENCH_ROUNDS=5).
//
// Each database holds 16 logical shards (fleet.ts: the test schema, from a template) and gets a
// pool of one connection (64 databases stay within the server's max_connections).
import { execFileSync } from "node:child_process";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { shardRouting } from "../src/index.js";
import { type Fleet, makeFleet, openFleet } from "./fleet.js";

const DATABASES = Number(process.env.BENCH_DATABASES ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** One open of `fleet` (warmed or not), then its first calls: the time (ms) until all answered, and the open's. */
async function firstCalls(fleet: Pick<Fleet, "names" | "shards" | "json">, warm: boolean) {
  const opening = performance.now();
  const opened = await openFleet(fleet, { warm, log: () => {} });
  const openMs = performance.now() - opening;
  try {
    const db = opened.registry.databases[0]!.client.$extends(shardRouting({ registry: opened.registry }));
    // One shard of each database (shard i lives on database i % n).
    const ids = fleet.names.map((_, i) => ShardedId.generate("Customer", fleet.shards[i]!));
    const started = performance.now();
    await Promise.all(ids.map((id) => db.customer.findUnique({ where: { id } })));
    return { ms: performance.now() - started, openMs };
  } finally {
    await opened.close();
  }
}

/** `firstCalls` in a new process (a service starting: nothing of Prisma's loaded or compiled yet). */
function inProcess(fleet: Fleet, warm: boolean): { ms: number; openMs: number } {
  const out = execFileSync(process.execPath, ["--import", "tsx", new URL(import.meta.url).pathname], {
    env: { ...process.env, COLD_CHILD: JSON.stringify({ names: fleet.names, json: fleet.json(1), warm }) },
    encoding: "utf8",
  });
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

const child = process.env.COLD_CHILD;
if (child) {
  const { names, json, warm } = JSON.parse(child) as { names: string[]; json: string; warm: boolean };
  const shards = JSON.parse(json).map((s: { group: number; member: number }) =>
    ShardIdentifier.of(s.group, s.member),
  );
  console.log(JSON.stringify(await firstCalls({ names, shards, json: () => json }, warm)));
  process.exit(0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const fleet = await makeFleet(DATABASES, "cold");
try {
  const cold: number[] = [];
  const warm: number[] = [];
  const coldOpen: number[] = [];
  const warmOpen: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const c = inProcess(fleet, false);
    const w = inProcess(fleet, true);
    cold.push(c.ms);
    coldOpen.push(c.openMs);
    warm.push(w.ms);
    warmOpen.push(w.openMs);
    console.error(`round ${round + 1}: cold ${c.ms.toFixed(0)} ms, warmed ${w.ms.toFixed(0)} ms`);
  }
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    [
      `| ${DATABASES} databases, a new process each time, median of ${ROUNDS} | open | first call on every database, all at once |`,
      "|---|---:|---:|",
      `| not warmed (\`warm: false\`) | ${s(median(coldOpen))} | ${s(median(cold))} |`,
      `| warmed at open (default) | ${s(median(warmOpen))} | ${s(median(warm))} |`,
      `| not warmed / warmed | | ${(median(cold) / median(warm)).toFixed(1)}x |`,
    ].join("\n"),
  );
} finally {
  await fleet.drop();
}
