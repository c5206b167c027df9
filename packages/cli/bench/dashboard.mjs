// `pnpm --filter @shardkit/cli bench`: the dashboard at fleet size, as ratios against a small fleet
// measured in the same run: 1,024 logical shards over 8 databases against 64 shards on 1, each
// with 5 minutes of load windows from its routers. Figures: time to the first snapshot (what
// `startDashboard` waits for, in this process: the small fleet's run loads the modules), the same
// from the start of a `shardkit dashboard` process (the built binary: Node's start, loading, the
// reads; until it prints its address, which it does once the first snapshot is in; the median of
// three, over the same windows; then again with both cores kept busy by two busy loops the bench
// starts, and ends, itself), the CPU one refresh costs (process.cpuUsage over refreshes, per
// second of wall time), the snapshot's size, and the memory held with 100 event streams that never
// read (and so per stream). And what a user waits for in Chromium: from opening the page of a running
// dashboard (its first snapshot in) until the page shows every shard, the median of five fresh
// pages, idle and with the two busy loops (bench/page.mjs). The browser test at this size is
// test/dashboard-fleet.test.ts.

import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { LatencySketch } from "@shardkit/prisma";
import { CREATE_LOAD_TABLE, FLUSH_LOAD } from "@shardkit/prisma/internal";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { startDashboard } from "../dist/index.js";
import { launchChromium, pageMedian } from "./page.mjs";

/** Load windows as a router's flush writes them. */
async function recordLoad(url, entries, options) {
  const rows = entries.map((e) => {
    const sketch = new LatencySketch();
    sketch.record(e.msPerCall, e.calls);
    return {
      shard: ShardIdentifier.parse(e.shard).bits,
      window_start: new Date(Date.now() - options.agoMs).toISOString(),
      window_ms: 10_000,
      router: options.router,
      calls: e.calls,
      writes: 0,
      rows_written: 0,
      db_ms: e.calls * e.msPerCall,
      sketch: sketch.toJSON(),
      top: [],
      config: "bench",
    };
  });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of CREATE_LOAD_TABLE) await client.query(statement);
    await client.query(FLUSH_LOAD, [JSON.stringify(rows), new Date(Date.now() - 86_400_000).toISOString()]);
  } finally {
    await client.end();
  }
}

const schema = fileURLToPath(new URL("../test/schema.prisma", import.meta.url));
/** The dashboard's default refresh. */
const REFRESH_MS = 2000;
const SAMPLE_MS = 20_000;

async function makeFleet(label, databases, shards, routers) {
  const names = Array.from({ length: databases }, (_, i) => `sk_cli_benchdash_${label}_${i}_${process.pid}`);
  const urls = await Promise.all(names.map((n) => createDatabase(MAIN_PORT, n)));
  await rolloutSchema({
    schema,
    targets: urls.map((url, i) => ({ name: names[i], adapter: new PrismaPg({ connectionString: url }) })),
    onProgress: () => {},
  });
  const entries = Array.from({ length: shards }, (_, i) => ({
    group: Math.floor(i / 64),
    member: i % 64,
    url: urls[i % databases],
  }));
  // 30 windows of 10 s per router and shard: 5 minutes.
  for (let d = 0; d < databases; d++) {
    const mine = entries.filter((_, i) => i % databases === d);
    for (let r = 0; r < routers; r++)
      for (let w = 1; w <= 30; w++)
        await recordLoad(
          urls[d],
          mine.map((e, i) => ({
            shard: `${e.group}/${e.member}`,
            calls: 10 + ((i * 7) % 50),
            msPerCall: 1 + (i % 3),
          })),
          { agoMs: w * 10_000, router: `router-${r}` },
        );
  }
  const config = join(tmpdir(), `shardkit-benchdash-${label}-${process.pid}.json`);
  writeFileSync(config, JSON.stringify(entries));
  return { label, config, names, shards };
}

/** The load window that covers the fleet's windows: its 5 minutes, and the time since the first read. */
const windowSince = (fleet) => 300_000 + Math.ceil((Date.now() - fleet.readAt) / 1000) * 1000;

/** A dashboard of this process on `fleet` (over the windows the first one read), once its first snapshot is in. */
function dashboardOn(fleet) {
  return startDashboard({
    config: fleet.config,
    port: 0,
    refreshMs: REFRESH_MS,
    timeoutMs: 60_000,
    maxStreams: 100,
    windowMs: windowSince(fleet),
  });
}

async function measure(fleet) {
  fleet.readAt = Date.now();
  const started = performance.now();
  const dashboard = await dashboardOn(fleet);
  const firstMs = performance.now() - started;
  const size = JSON.stringify(dashboard.snapshot()).length;
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await new Promise((r) => setTimeout(r, SAMPLE_MS));
  const cpu = process.cpuUsage(cpu0);
  const cpuShare = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  // 100 event streams whose clients never read.
  globalThis.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const external0 = process.memoryUsage().external;
  const rss0 = process.memoryUsage().rss;
  const sockets = Array.from({ length: 100 }, () => {
    const s = connect(dashboard.port, "127.0.0.1");
    s.on("error", () => {});
    s.write(`GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    s.pause();
    return s;
  });
  // Several snapshots go out while they do not read.
  await new Promise((r) => setTimeout(r, 5 * REFRESH_MS));
  globalThis.gc?.();
  const heapGrowth = process.memoryUsage().heapUsed - heap0;
  // Buffers (what a socket holds for its client) are outside the heap.
  const externalGrowth = process.memoryUsage().external - external0;
  const rssGrowth = process.memoryUsage().rss - rss0;
  const streams = dashboard.streams();
  for (const s of sockets) s.destroy();
  await dashboard.close();
  return { firstMs, size, cpuShare, heapGrowth, externalGrowth, rssGrowth, streams };
}

const cli = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
// `--against <cli.js>`: the command's figures of another build too (the version before a change),
// measured in the same run, each build's three runs right after the other's.
const againstAt = process.argv.indexOf("--against");
const against = againstAt > 0 ? process.argv[againstAt + 1] : undefined;

/** From the start of `shardkit dashboard` to its address printed (after the first snapshot), in ms. */
function fromCommand(fleet, bin = cli) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(
      process.execPath,
      [
        bin,
        "dashboard",
        "--config",
        fleet.config,
        "--port",
        "0",
        "--refresh",
        String(REFRESH_MS),
        "--timeout",
        "60000",
        // The windows the in-process run read: its 5 minutes, and the time since.
        "--window",
        String(windowSince(fleet)),
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let err = "";
    let ms;
    child.stderr.on("data", (d) => {
      err += d;
      if (ms === undefined && /Ctrl-C stops it/.test(err)) {
        ms = performance.now() - started;
        child.kill("SIGINT");
      }
    });
    child.on("exit", () =>
      ms === undefined ? reject(new Error(`shardkit dashboard: ${err}`)) : resolve(ms),
    );
  });
}

/** Two processes that keep both cores busy, until `stop()`. */
function busyLoops() {
  const loops = [0, 1].map(() => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
  const stop = () => {
    for (const loop of loops) loop.kill("SIGKILL");
  };
  // The bench's end, however it ends, ends them.
  process.once("exit", stop);
  return stop;
}

async function commandMedian(fleet, bin = cli) {
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(await fromCommand(fleet, bin));
  return runs.sort((x, y) => x - y)[1];
}

/** The command's medians on both fleets: this build's, then the other's (`--against`). */
async function commands(small, large) {
  const builds = [cli, ...(against ? [against] : [])];
  const figures = [];
  for (const bin of builds) figures.push([await commandMedian(small, bin), await commandMedian(large, bin)]);
  return figures;
}

/**
 * Page open to fleet drawn, on a dashboard of this process whose first snapshot is in: the median of
 * five fresh pages, then five more with two busy loops.
 */
async function pageFigures(browser, fleet) {
  const dashboard = await dashboardOn(fleet);
  try {
    const idle = await pageMedian(browser, dashboard.url, fleet.shards);
    const stop = busyLoops();
    try {
      return { idle, busy: await pageMedian(browser, dashboard.url, fleet.shards) };
    } finally {
      stop();
    }
  } finally {
    await dashboard.close();
  }
}

/** The machine's load average over the last minute, when the bench starts and when it ends. */
const load = () => loadavg()[0].toFixed(1);
const loadAtStart = load();
const small = await makeFleet("small", 1, 64, 1);
const large = await makeFleet("large", 8, 1024, 4);
try {
  const a = await measure(small);
  const b = await measure(large);
  const idle = await commands(small, large);
  const stop = busyLoops();
  let busy;
  try {
    busy = await commands(small, large);
  } finally {
    stop();
  }
  [a.commandMs, b.commandMs] = idle[0];
  [a.busyMs, b.busyMs] = busy[0];
  const browser = await launchChromium();
  try {
    a.page = await pageFigures(browser, small);
    b.page = await pageFigures(browser, large);
  } finally {
    await browser.close();
  }
  console.log(`Load average (1 min): ${loadAtStart} at the start, ${load()} at the end.\n`);
  const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
  const change = (n) => `${n < 0 ? "" : "+"}${mb(n)}`;
  console.log(
    "| fleet | first snapshot | from the command's start | the same, two busy loops | CPU, refreshing every 2 s | snapshot | 100 event streams that never read: heap, RSS, unread | per stream: heap + buffers (and RSS) |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [label, m] of [
    ["64 shards, 1 database, 1 router (baseline)", a],
    ["1,024 shards, 8 databases, 4 routers", b],
  ])
    console.log(
      `| ${label} | ${Math.round(m.firstMs)} ms (${(m.firstMs / a.firstMs).toFixed(1)}x) | ${Math.round(m.commandMs)} ms (${(m.commandMs / a.commandMs).toFixed(1)}x) | ${Math.round(m.busyMs)} ms (${(m.busyMs / a.commandMs).toFixed(1)}x) | ${(m.cpuShare * 100).toFixed(1)}% of a core | ${mb(m.size)} | ${change(m.heapGrowth)}, ${change(m.rssGrowth)}, ${mb(m.streams.unreadBytes)} (${m.streams.open} open) | ${Math.round((m.heapGrowth + m.externalGrowth) / 100 / 1000)} KB (${Math.round(m.rssGrowth / 100 / 1000)} KB) |`,
    );
  const page = (x) => `${Math.round(x)} ms (${(x / a.page.idle.ms).toFixed(1)}x)`;
  const each = (p) => p.samples.map(Math.round).join(", ");
  console.log(
    "\nIn Chromium, from opening the page until every shard is drawn (median of 5; each sample in order):\n",
  );
  console.log("| fleet | page open to fleet drawn | the same, two busy loops |");
  console.log("|---|---|---|");
  for (const [label, m] of [
    ["64 shards (baseline)", a],
    ["1,024 shards", b],
  ])
    console.log(
      `| ${label} | ${page(m.page.idle.ms)} [${each(m.page.idle)}] | ${page(m.page.busy.ms)} [${each(m.page.busy)}] |`,
    );
  if (against) {
    const ms = (x) => `${Math.round(x)} ms (${(x / idle[0][0]).toFixed(1)}x)`;
    console.log(
      `\nFrom the command's start, against ${against} (ratios against this build's 64 shards, idle):\n`,
    );
    console.log(
      "| | this build, idle | the other, idle | this build, two busy loops | the other, two busy loops |",
    );
    console.log("|---|---|---|---|---|");
    for (const [label, i] of [
      ["64 shards", 0],
      ["1,024 shards", 1],
    ])
      console.log(
        `| ${label} | ${ms(idle[0][i])} | ${ms(idle[1][i])} | ${ms(busy[0][i])} | ${ms(busy[1][i])} |`,
      );
  }
} finally {
  for (const f of [small, large]) {
    for (const n of f.names) await dropDatabase(MAIN_PORT, n);
    rmSync(f.config, { force: true });
  }
}
