// The balance demo (`demo:balance`): clients confirm units of eight buckets, one per logical shard,
// with most of the traffic on the shards of one database. Each client's router counts the load of
// every shard (`shardkit."ShardLoad"`); after a first phase, `runBalance` of @shardkit/ownership
// reads that load and moves shards off the hottest database while the clients go on. It prints the
// hottest database's share of the load and the clients' p99 before and after, and counts every
// acknowledged decision against the rows at the end.
//
// By default the databases are embedded PGlite (in this process, so the clients are routers in it)
// and the moves are offline. With SHARDKIT_SHARDS (shards on at least two databases; spares under
// `databases`), they are PostgreSQL, each client is a process of its own and the moves are live
// (SHARDKIT_MOVE_MODE=offline moves offline there too).
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { type BalanceRun, runBalance } from "@shardkit/ownership";
import type { LoadOption } from "@shardkit/prisma";
import { say } from "@shardkit/service-kit/demo";
import { AllocationService } from "./allocation-service.js";
import { AllocationsError } from "./errors.js";
import { embeddedDatabases, FENCED_TABLES, openRouter, openServiceRouter, type Router } from "./shards.js";

/** Decisions per phase (before and after the balance), all clients together: phases end by work done, not by time. */
const PHASE_DECISIONS = Number(process.env.SHARDKIT_DEMO_DECISIONS ?? 600);
const CLIENTS = Number(process.env.SHARDKIT_DEMO_CLIENTS ?? 3);
/** Routers write their load every second here (10 s by default), so a short demo has figures. */
const LOAD: LoadOption = { intervalMs: 1000 };
/** Share of the decisions per bucket, heaviest first: the first database's shards get most. */
const WEIGHTS = [40, 25, 15, 8, 4, 3, 3, 2];

/** What a client reports when asked. */
interface Report {
  latencies: number[];
  acknowledged: { key: string; id: string }[];
  retries: number;
}

/** A client of the demo: in this process or another. */
interface Client {
  /** Decisions it has made so far. */
  count(): Promise<number>;
  /** The latencies of its decisions since the last mark (its load flushed first). */
  mark(): Promise<number[]>;
  /** Finishes the decision under way, flushes its load, and reports. */
  stop(): Promise<Report>;
}

/** A small seeded PRNG (mulberry32): the same traffic on every run. */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * One client's traffic on `router`: a confirmation of one unit at a time on a bucket drawn by
 * `WEIGHTS`, each under its own key. A decision that fails as unavailable (a shard fenced for a
 * moment, a former owner) is asked again under the same key, so it is decided once and acknowledged
 * once.
 */
function traffic(router: Router, buckets: readonly string[], name: string) {
  const service = new AllocationService(router);
  const next = random([...name].reduce((h, c) => h * 31 + c.charCodeAt(0), 7));
  const total = WEIGHTS.slice(0, buckets.length).reduce((a, b) => a + b, 0);
  const pick = () => {
    let r = next() * total;
    for (let i = 0; i < buckets.length; i++) {
      r -= WEIGHTS[i] ?? 0;
      if (r < 0) return buckets[i]!;
    }
    return buckets[buckets.length - 1]!;
  };
  const report: Report = { latencies: [], acknowledged: [], retries: 0 };
  let stopping = false;
  const done = (async () => {
    for (let i = 0; !stopping; i++) {
      const key = `${name}-${i}`;
      const bucketId = pick();
      const started = performance.now();
      for (;;) {
        try {
          const { result } = await service.confirm({ bucketId, desk: name }, key);
          report.acknowledged.push({ key, id: result.id });
          break;
        } catch (error) {
          if (error instanceof AllocationsError && error.code !== "SHARD_UNAVAILABLE") throw error;
          report.retries++;
          await new Promise((r) => setTimeout(r, 50)); // back off, then ask again under the same key
        }
      }
      report.latencies.push(performance.now() - started);
      // Embedded PGlite answers in this process, without I/O: let timers (the phases, the load's
      // flushes, the map's polls) run between decisions.
      await new Promise((r) => setImmediate(r));
    }
  })();
  let marked = 0;
  return {
    count: async () => report.latencies.length,
    async mark() {
      await router.db.$shardLoad()?.flush();
      const since = report.latencies.slice(marked);
      marked = report.latencies.length;
      return since;
    },
    async stop() {
      stopping = true;
      await done;
      await router.db.$shardLoad()?.flush();
      return report;
    },
  };
}

/** The client processes this demo started and that have not exited: ended when the demo ends, however it ends. */
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

/** A client in a process of its own (PostgreSQL): this file run with `client <name>`. */
async function processClient(name: string, buckets: readonly string[]): Promise<Client> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ["client", name, ...buckets], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.add(child);
  child.on("exit", () => children.delete(child));
  const replies: ((value: unknown) => void)[] = [];
  child.on("message", (message) => replies.shift()?.(message));
  // Its first message says its router is open and it is deciding.
  await new Promise((resolve) => replies.push(resolve));
  // One question at a time per client (the parent asks in turn), so answers come in order.
  const ask = <T>(what: string): Promise<T> => {
    const reply = new Promise<T>((resolve) => replies.push(resolve as (value: unknown) => void));
    child.send(what);
    return reply;
  };
  return {
    count: () => ask<number>("count"),
    mark: () => ask<number[]>("mark"),
    stop: () => ask<Report>("stop"),
  };
}

async function clientProcess(name: string, buckets: string[]) {
  const router = await openServiceRouter({
    shardsJson: process.env.SHARDKIT_SHARDS,
    dataDir: "/nonexistent",
    load: LOAD,
  });
  const t = traffic(router, buckets, name);
  process.send!("ready");
  // A client never outlives the demo that started it: when the demo goes away (it ended, failed or
  // was killed), the channel closes and so does the client.
  process.on("disconnect", () => process.exit(0));
  process.on("message", async (message) => {
    if (message === "count") process.send!(await t.count());
    if (message === "mark") process.send!(await t.mark());
    if (message === "stop") {
      process.send!(await t.stop());
      await router.close();
      process.disconnect();
    }
  });
}

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** The most loaded database by the plan's figures, and its share of the load. */
function hottest(run: BalanceRun, when: "before" | "after") {
  const figures = run.plan![when];
  const total = figures.databases.reduce((a, d) => a + d.load, 0);
  const top = [...figures.databases].sort((x, y) => y.load - x.load)[0]!;
  return `${top.name}, ${total > 0 ? Math.round((100 * top.load) / total) : 0}% of the load`;
}

// Longer than 80 lines: the demo's script, read top to bottom in the order it prints.
async function main() {
  const pg = process.env.SHARDKIT_SHARDS;
  const mode = (process.env.SHARDKIT_MOVE_MODE ?? (pg ? "live" : "offline")) as "live" | "offline";
  if (mode !== "live" && mode !== "offline")
    throw new Error(`SHARDKIT_MOVE_MODE: expected live or offline, got ${JSON.stringify(mode)}`);
  if (!pg && mode === "live")
    throw new Error(
      "SHARDKIT_MOVE_MODE=live needs PostgreSQL (SHARDKIT_SHARDS): PGlite has no logical replication",
    );
  const shards = Array.from({ length: 8 }, (_, i) => ShardIdentifier.of(0, i));
  let mover: Router;
  let openClient: (name: string, buckets: readonly string[]) => Promise<Client>;
  let closeAll = async () => {};
  let sourceConnection: ((name: string) => string) | undefined;
  if (pg) {
    say("opening the mover's router on the databases of SHARDKIT_SHARDS");
    mover = await openServiceRouter({
      shardsJson: pg,
      dataDir: mkdtempSync(join(tmpdir(), "balance-demo-")),
      poll: false,
      load: false,
    });
    openClient = processClient;
    const config = JSON.parse(pg) as
      | { shards?: { url: string }[]; databases?: { url: string }[] }
      | { url: string }[];
    const urls = Array.isArray(config)
      ? config.map((c) => c.url)
      : [...(config.shards ?? []), ...(config.databases ?? [])].map((c) => c.url);
    // A database's registry name is its URL with any password hidden.
    sourceConnection = (name) =>
      urls.find((url) => url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@") === name)!;
  } else {
    say("opening 3 embedded PGlite databases in memory (db-a, db-b, db-c), the schema applied to each");
    const databases = await embeddedDatabases(
      [
        { name: "db-a", shards: shards.slice(0, 4) },
        { name: "db-b", shards: shards.slice(4, 6) },
        { name: "db-c", shards: shards.slice(6, 8) },
      ],
      undefined,
      (event) => {
        if (event.type === "start" && event.applying)
          say(`  schema ${event.index + 1}/${event.total} ${event.target}: applying`);
      },
    );
    mover = await openRouter(databases, { poll: false, load: false });
    const routers: Router[] = [];
    openClient = async (name, buckets) => {
      const router = await openRouter(databases, { poll: true, load: LOAD });
      routers.push(router);
      return traffic(router, buckets, name);
    };
    closeAll = async () => {
      for (const r of routers) await r.close();
      for (const d of databases) await d.pglite.close();
    };
  }
  const registry = mover.registry;
  // One bucket per shard, heaviest traffic on the shards of the first database.
  const ordered = registry.databases.flatMap((d) => d.shards);
  const service = new AllocationService(mover);
  const buckets: string[] = [];
  for (const shard of ordered.slice(0, WEIGHTS.length)) {
    const { result } = await service.createBucket(
      { name: `bucket-${shard.key}`, capacity: 10_000_000, shard: shard.key },
      `demo-bucket-${shard.key}-${ShardedId.generate("Bucket", shard)}`,
    );
    buckets.push(result.id);
  }
  say(
    `databases: ${registry.databases.map((d) => `${d.name} (${d.shards.map((s) => s.key).join(" ") || "spare"})`).join(", ")}`,
  );
  const first = registry.databases[0]!;
  const share = ordered
    .slice(0, WEIGHTS.length)
    .reduce((a, s, i) => a + (first.shards.includes(s) ? WEIGHTS[i]! : 0), 0);
  const weightTotal = WEIGHTS.slice(0, buckets.length).reduce((a, b) => a + b, 0);
  say(
    `${CLIENTS} clients${pg ? " (processes)" : ""}; ${Math.round((100 * share) / weightTotal)}% of their decisions go to ${first.name}'s shards`,
  );

  const clients = await Promise.all(
    Array.from({ length: CLIENTS }, (_, i) => openClient(`client-${i + 1}`, buckets)),
  );
  // A phase lasts until the clients have made PHASE_DECISIONS more decisions, however long that
  // takes on this machine; its length is the window of load measured.
  const decided = async () => (await Promise.all(clients.map((c) => c.count()))).reduce((a, b) => a + b, 0);
  const phase = async () => {
    const started = Date.now();
    const from = await decided();
    while ((await decided()) - from < PHASE_DECISIONS) await new Promise((r) => setTimeout(r, 100));
    return Date.now() - started;
  };
  const beforeMs = await phase();
  const before = (await Promise.all(clients.map((c) => c.mark()))).flat();

  const balanceStarted = Date.now();
  const run = await runBalance({
    registry,
    map: mover.map,
    tables: FENCED_TABLES,
    // The windows flushed at the phase's end; one load interval more takes in the one it began in.
    windowMs: beforeMs + 1000,
    mode,
    ...(sourceConnection ? { sourceConnection: (source) => sourceConnection!(source.name) } : {}),
    onEvent: (event) => {
      if (event.type === "move")
        say(`  moving ${event.shard}: ${event.from} -> ${event.to} (${event.reason})`);
      if (event.type === "moved") say(`  moved ${event.shard}: writes held ${Math.round(event.freezeMs)} ms`);
    },
  });
  const during = (await Promise.all(clients.map((c) => c.mark()))).flat();
  const afterMs = await phase();
  const after = (await Promise.all(clients.map((c) => c.mark()))).flat();
  const reports = await Promise.all(clients.map((c) => c.stop()));
  const measuredAfter = await runBalance({
    registry,
    tables: FENCED_TABLES,
    windowMs: afterMs, // the phase after the balance only
    dryRun: true,
  });

  const p99 = (values: number[]) => `${quantile(values, 0.99).toFixed(1)} ms over ${values.length} decisions`;
  say(`before: hottest database ${hottest(run, "before")}; clients' p99 ${p99(before)}`);
  say(
    `balance: ${run.moves.filter((m) => m.status === "moved").length} moves in ${((Date.now() - balanceStarted) / 1000).toFixed(1)} s; ${
      during.length > 0
        ? `the clients went on (p99 ${p99(during)})`
        : "the clients waited (embedded PGlite runs in this one thread: the balancer's reads keep it)"
    }: ${run.reason}`,
  );
  for (const m of run.moves.filter((m) => m.status === "failed"))
    say(`  failed: ${m.shard} -> ${m.to}: ${m.error}`);
  for (const h of run.plan?.hot ?? []) say(`  hot: shard ${h.shard} (${h.reason.split(":")[0]})`);
  say(`after: hottest database ${hottest(measuredAfter, "before")}; clients' p99 ${p99(after)}`);

  // Every acknowledged decision is a row, once; every row was acknowledged.
  await mover.map.refresh();
  const acknowledged = reports.flatMap((r) => r.acknowledged);
  const ids = new Set(acknowledged.map((a) => a.id));
  let rows = 0;
  let found = 0;
  for (const bucketId of buckets) {
    const recorded = await mover.db.confirmation.findMany({ where: { bucketId }, select: { id: true } });
    rows += recorded.length;
    found += recorded.filter((r) => ids.has(r.id)).length;
  }
  say(
    `decisions: ${acknowledged.length} acknowledged, ${rows} recorded; lost ${ids.size - found}, doubled ${rows - ids.size + (acknowledged.length - ids.size)}; ${reports.reduce((a, r) => a + r.retries, 0)} asked again after a refusal`,
  );
  await mover.close();
  await closeAll();
}

if (process.argv[2] === "client") await clientProcess(process.argv[3]!, process.argv.slice(4));
else await main();
