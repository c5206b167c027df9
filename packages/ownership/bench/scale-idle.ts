// What keeping partition maps current costs an idle fleet, and how soon a switch reaches every
// router: ROUTERS routers (PartitionMaps in this process, each with a client of its own per
// database, a pool of one) over DATABASES databases on a server of the bench's own
// (test/fleet.ts), counted by the server itself (`pg_stat_statements`).
//
// Two ways, in one run: every database looked at every tick (`sweepIntervalMs` = the tick, as
// `start()` did before: one digest per database per tick) and the default (each tick looks at one
// database in turn, every change is announced in every database, every database is looked at every
// 30 s). For each: statements per router per database per second over WINDOW_MS (default 60 s,
// two sweeps) of idle routers, then SWITCHES moves of a shard by one of them and, for each, the
// time from the move's end until every router routes the shard to its new owner (no call made).
// Run: `pnpm exec tsx bench/scale-idle.ts` in packages/ownership (BENCH_ROUTERS=16,
// BENCH_DATABASES=64, BENCH_WINDOW_MS=60000, BENCH_SWITCHES=3).
import { ShardIdentifier } from "@shardkit/id";
import { moveShard, PartitionMap } from "../src/index.js";
import { fleetRegistry, type MapFleet, mapFleet, shareFleetServer, statementsIn } from "../test/fleet.js";
import { TABLES } from "../test/layout.js";

const ROUTERS = Number(process.env.BENCH_ROUTERS ?? 16);
const DATABASES = Number(process.env.BENCH_DATABASES ?? 64);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 60_000);
const SWITCHES = Number(process.env.BENCH_SWITCHES ?? 3);
const INTERVAL_MS = 1000;

async function measure(fleet: MapFleet, way: string, sweepIntervalMs: number | undefined, first: number) {
  const routers = Array.from({ length: ROUTERS }, () => fleetRegistry(fleet.urls, 4, 1));
  const maps = await Promise.all(
    routers.map((registry) =>
      PartitionMap.open({
        registry,
        tables: TABLES,
        timeoutMs: 60_000,
        refreshIntervalMs: INTERVAL_MS,
        ...(sweepIntervalMs === undefined ? {} : { sweepIntervalMs }),
      }),
    ),
  );
  try {
    for (const map of maps) map.start();
    // The first tick of each router looks at every database: measured after it.
    await new Promise((resolve) => setTimeout(resolve, 3 * INTERVAL_MS));
    const before = await statementsIn(fleet.names);
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const sent = (await statementsIn(fleet.names)) - before;
    const rate = sent / ROUTERS / DATABASES / ((performance.now() - started) / 1000);
    const seen: number[] = [];
    for (let i = 0; i < SWITCHES; i++) {
      // Shard first + i lives on database (first + i) / 4: moved to the next database.
      const shard = ShardIdentifier.of(0, first + i);
      const to = routers[0]!.databases[(routers[0]!.databaseOf(shard).index + 1) % DATABASES]!;
      await moveShard({ map: maps[0]!, shard, to, mode: "offline", onProgress: () => {} });
      const moved = performance.now();
      while (!routers.every((r) => r.databaseOf(shard).name === to.name)) {
        if (performance.now() - moved > 120_000) throw new Error(`shard ${shard.key}: not seen in 120 s`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      seen.push(performance.now() - moved);
    }
    return `| ${way} | ${rate.toFixed(3)} | ${seen.map((ms) => (ms / 1000).toFixed(2)).join(", ")} s |`;
  } finally {
    for (const map of maps) map.close();
    for (const registry of routers) await registry.disconnect();
  }
}

const releaseServer = await shareFleetServer();
const fleet = await mapFleet(DATABASES, "idle");
const rows: string[] = [];
try {
  rows.push(await measure(fleet, "every database every tick (before)", INTERVAL_MS, 0));
  console.error(rows.at(-1));
  rows.push(await measure(fleet, "one database a tick, announcements, sweep every 30 s (now)", undefined, 8));
  console.error(rows.at(-1));
} finally {
  await fleet.drop();
  await releaseServer();
}
console.log(
  [
    `| ${ROUTERS} routers x ${DATABASES} databases, idle, tick ${INTERVAL_MS} ms | statements / router / database / s | switch seen by every router (each move) |`,
    "|---|---:|---:|",
    ...rows,
  ].join("\n"),
);
