// pnpm bench (in packages/ownership): what keeping the partition map current costs an idle fleet,
// from 1 to 64 databases and 1 to 16 routers, each figure against the old way measured in the same
// run: every tick reading every database's records in full (what `start()` did first) against the
// digest check of every database every tick (`start()` with `sweepIntervalMs` equal to the tick: one
// digest per database, a full read only where records changed). bench/scale-idle.ts measures what
// `start()` does by default now (one database a tick, announcements, a sweep every 30 s).
//
// Routers are PartitionMaps in this process, each with clients of its own (as separate service
// instances have), connected through a PgBouncer of the bench's own in transaction mode (one server
// connection per database: 16 routers x 64 databases direct would need 1,024 connections). For
// each size and way, over a window of BENCH_WINDOW_MS (default 6000) at a refresh interval of
// 1000 ms: statements per router per database per second and their median time from sent to
// answered (counted on their way out), and router CPU per router per second (this process).
//
// BENCH_SIZES (default "1,4,16,64") and BENCH_ROUTERS (default "1,4,16") pick the grid.
import { PrismaPg } from "@prisma/adapter-pg";
import { createShardRegistry } from "@shardkit/prisma";
import { startPgBouncer } from "@shardkit/test-db";
import { makeFleet } from "../../prisma/bench/fleet.js";
import { PartitionMap } from "../src/index.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { TABLES } from "../test/layout.js";

const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 6000);
const SIZES = (process.env.BENCH_SIZES ?? "1,4,16,64").split(",").map(Number);
const ROUTERS = (process.env.BENCH_ROUTERS ?? "1,4,16").split(",").map(Number);
const INTERVAL_MS = 1000;
const schema = new URL("../test/schema.prisma", import.meta.url).pathname;

const bouncer = await startPgBouncer({ poolSize: 1 });
console.log(
  "| databases | routers | way | statements / router / database / s | median statement ms | router CPU ms/s per router |",
);
console.log("|---|---|---|---|---|---|");
try {
  for (const n of SIZES) {
    const fleet = await makeFleet(n, "map", 16, schema);
    try {
      for (const r of ROUTERS) await measure(n, r, fleet);
    } finally {
      await fleet.drop();
    }
  }
} finally {
  await bouncer.stop();
}

async function measure(n: number, r: number, fleet: Awaited<ReturnType<typeof makeFleet>>) {
  let sent = 0;
  let times: number[] = [];
  const routers = await Promise.all(
    Array.from({ length: r }, async () => {
      const clients = fleet.names.map((name) => {
        const client = new PrismaClient({
          adapter: new PrismaPg({ connectionString: bouncer.url(name), max: 1 }),
        });
        // Counted on the way through, for the client and for its transactions alike (`this`).
        const query = client.$queryRawUnsafe;
        client.$queryRawUnsafe = function (this: PrismaClient, sql: string, ...values: unknown[]) {
          sent++;
          const t0 = performance.now();
          const answer = query.call(this, sql, ...values);
          void answer.then(
            () => times.push(performance.now() - t0),
            () => {},
          );
          return answer;
        } as typeof client.$queryRawUnsafe;
        return client;
      });
      const registry = createShardRegistry({
        shards: fleet.shards.map((shard, i) => ({ shard, client: clients[fleet.databaseOf[i]!]! })),
      });
      const map = await PartitionMap.open({
        registry,
        tables: TABLES,
        refreshIntervalMs: INTERVAL_MS,
        sweepIntervalMs: INTERVAL_MS,
      });
      return { registry, map };
    }),
  );
  const window = async (way: string, run: () => () => Promise<void>) => {
    sent = 0;
    times = [];
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const stop = run();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    await stop();
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const routerCpu = (cpu.user + cpu.system) / 1000 / seconds / r;
    const perPair = sent / seconds / r / n;
    const median = [...times].sort((x, y) => x - y)[times.length >> 1] ?? 0;
    console.log(
      `| ${n} | ${r} | ${way} | ${perPair.toFixed(2)} | ${median.toFixed(2)} | ${routerCpu.toFixed(1)} |`,
    );
  };
  // The old way: a full read of every database every interval.
  await window("full read every tick (before)", () => {
    const timers = routers.map(({ map }) => {
      let reading: Promise<void> = Promise.resolve();
      const timer = setInterval(() => {
        reading = map.refresh().catch(() => {});
      }, INTERVAL_MS);
      return async () => {
        clearInterval(timer);
        await reading;
      };
    });
    return async () => {
      for (const stop of timers) await stop();
    };
  });
  await window("digest check (now)", () => {
    for (const { map } of routers) map.start();
    return async () => {
      for (const { map } of routers) await map.stop();
    };
  });
  for (const { map, registry } of routers) {
    map.close();
    await registry.disconnect();
  }
}
