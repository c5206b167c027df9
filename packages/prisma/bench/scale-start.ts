// How start-up grows with the fleet: `openShards` over 1, 4, 16 and 64 databases, first with no
// schema fingerprint recorded (every database gets the schema engine: a push that finds the schema
// already there, as on the first start after upgrading), one database at a time and then
// `rolloutConcurrency` (default 4) at a time, and then again with the fingerprints that open
// recorded (one statement per database, no engine). Run: `pnpm exec tsx bench/scale-start.ts` in
// packages/prisma (BENCH_SIZES=1,4,16,64, BENCH_CONCURRENCY=4 to change the run).
//
// Each size gets its own fleet (fleet.ts: the test schema, from a template); its databases hold 16
// logical shards each and get a pool of one connection (64 databases stay within the server's
// max_connections). The time is from the call to `openShards` until it resolves, the clients made
// and every database ready; closing is not counted.
import pg from "pg";
import type { RolloutEvent } from "../src/rollout.js";
import { type Fleet, makeFleet, openFleet } from "./fleet.js";

const SIZES = (process.env.BENCH_SIZES ?? "1,4,16,64").split(",").map(Number);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);

/** Removes every database's recorded fingerprint: the next open runs the engine on each. */
async function forget(fleet: Fleet) {
  for (const url of fleet.urls) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query("DROP SCHEMA IF EXISTS shardkit CASCADE");
    await admin.end();
  }
}

/** One open of the fleet: its time (ms), and how many databases the engine ran on. */
async function timedOpen(fleet: Fleet, rolloutConcurrency: number) {
  let engineRuns = 0;
  const started = performance.now();
  const opened = await openFleet(fleet, {
    rolloutConcurrency,
    onProgress: (event: RolloutEvent) => {
      if (event.type === "done" && event.report.fingerprint !== "matched") engineRuns++;
    },
    onState: () => {},
  });
  const ms = performance.now() - started;
  const ready = opened.databases().filter((d) => d.state === "ready").length;
  await opened.close();
  if (ready !== fleet.urls.length) throw new Error(`only ${ready} of ${fleet.urls.length} databases ready`);
  return { ms, engineRuns };
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rows: string[] = [];
for (const size of SIZES) {
  const fleet = await makeFleet(size, `start${size}`);
  try {
    await forget(fleet);
    const serial = await timedOpen(fleet, 1);
    await forget(fleet);
    const parallel = await timedOpen(fleet, CONCURRENCY);
    const again = await timedOpen(fleet, CONCURRENCY);
    if (serial.engineRuns !== size || parallel.engineRuns !== size || again.engineRuns !== 0) {
      throw new Error(
        `engine runs ${serial.engineRuns}/${parallel.engineRuns}/${again.engineRuns} at ${size}`,
      );
    }
    rows.push(
      `| ${size} | ${seconds(serial.ms)} | ${seconds(parallel.ms)} | ${(serial.ms / parallel.ms).toFixed(2)}x | ${seconds(again.ms)} | ${(serial.ms / again.ms).toFixed(1)}x |`,
    );
    console.error(rows.at(-1));
  } finally {
    await fleet.drop();
  }
}

console.log(
  [
    `| databases | first open, 1 at a time | first open, ${CONCURRENCY} at a time | speed-up | second open (fingerprints) | first (1 at a time) / second |`,
    "|---:|---:|---:|---:|---:|---:|",
    ...rows,
  ].join("\n"),
);
