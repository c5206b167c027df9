// `pnpm exec tsx bench/scale-relay.ts` (in packages/prisma): the outbox relay as the fleet grows.
//
//   throughput: BENCH_EVENTS (default 20,000) pending events spread evenly over 1, 4, 16 and 64
//     (BENCH_SIZES) databases (the first n of one fleet), drained by one relay (`start()`) into an in-process sink
//     that only counts them. Events/s at each size, as a ratio to one database; sizes alternate
//     within each of BENCH_ROUNDS rounds (default 3), so noise hits every size alike, and the median
//     round is reported. Each event is checked delivered once: duplicates and poll errors are counted.
//   Also the peak of the connections open to the fleet's databases meanwhile (pg_stat_activity,
//     sampled every 50 ms).
//   idle cost: the claim statements a relay sends over BENCH_IDLE_MS (default 30 s) to 64 databases
//     with nothing to deliver, counted from each client's query log.
//
// The fleet lives on the machine's PostgreSQL server, which other work shares (max_connections
// 100 here): each database's pool is BENCH_POOL connections (default 10) but never more than
// BENCH_CONNECTIONS / n (default 60 / n, at least 1), so a run never asks the server for more than
// about 60 connections. BENCH_RELAY is JSON merged into the relay's options (to compare settings);
// BENCH_RELAY_MODULE a file exporting another `createOutboxRelay` to measure instead (a copy of an
// earlier relay, for a before and after).

import { pathToFileURL } from "node:url";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { MAIN_PORT, pgUrl } from "@shardkit/test-db";
import pg from "pg";
import { createShardRegistry, type OutboxRelayOptions } from "../src/index.js";
import { outboxRecord } from "../src/outbox.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { makeFleet } from "./fleet.js";
import { median } from "./measure.js";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POOL = Number(process.env.BENCH_POOL ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 60);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 30_000);
const EXTRA = JSON.parse(process.env.BENCH_RELAY ?? "{}") as Partial<OutboxRelayOptions<PrismaClient>>;
const SIZES = (process.env.BENCH_SIZES ?? "1,4,16,64").split(",").map(Number);
const { createOutboxRelay } = (await import(
  process.env.BENCH_RELAY_MODULE
    ? pathToFileURL(process.env.BENCH_RELAY_MODULE).href
    : "../src/relay/relay.js"
)) as typeof import("../src/relay/relay.js");
/** Events per aggregate: a batch's events of one aggregate are delivered one after another. */
const PER_AGGREGATE = 5;

const fleet = await makeFleet(Math.max(...SIZES), "relay");
const activity = new pg.Client({ connectionString: pgUrl(MAIN_PORT, "postgres") });
try {
  await activity.connect();
  await run();
} finally {
  await activity.end();
  await retrying(() => fleet.drop());
}

/** `run()`, again (for up to 5 minutes) while other work on the server holds every connection. */
async function retrying<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt === 60) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5000));
    }
  }
}

/** Samples the connections open to the fleet's databases until the function it returns is called: the peak. */
function peakConnections() {
  let peak = 0;
  let running = true;
  const sampling = (async () => {
    while (running) {
      const { rows } = await activity.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ANY($1)",
        [fleet.names],
      );
      peak = Math.max(peak, rows[0]!.n);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return async () => {
    running = false;
    await sampling;
    return peak;
  };
}

/** Clients and a registry over the first `n` databases of the fleet (their shards only). */
function registryOver(n: number, log?: (sql: string) => void) {
  const pool = Math.max(1, Math.min(POOL, Math.floor(CONNECTIONS / n)));
  const clients = fleet.urls.slice(0, n).map((url) => {
    const client = new PrismaClient({
      adapter: new PrismaPg({ connectionString: url, max: pool }),
      ...(log ? { log: [{ emit: "event" as const, level: "query" as const }] } : {}),
    });
    type Logged = { $on(event: "query", listen: (event: { query: string }) => void): void };
    if (log) (client as unknown as Logged).$on("query", (event) => log(event.query));
    return client;
  });
  const registry = createShardRegistry({
    shards: fleet.shards.flatMap((shard, i) =>
      fleet.databaseOf[i]! < n ? [{ shard, client: clients[fleet.databaseOf[i]!]! }] : [],
    ),
  });
  return { clients, registry, pool };
}

/** `EVENTS` pending events, spread evenly over the databases' shards, written straight to their outboxes. */
async function seed(clients: PrismaClient[], n: number) {
  const shardsOf = clients.map((_, d) => fleet.shards.filter((_, i) => fleet.databaseOf[i] === d));
  const rows = clients.map(() => [] as ReturnType<typeof outboxRecord>[]);
  const aggregates = clients.map(() => "");
  for (let i = 0; i < EVENTS; i++) {
    const d = i % n;
    const k = Math.floor(i / n); // the event's place on its database
    const shard = shardsOf[d]![Math.floor(k / PER_AGGREGATE) % shardsOf[d]!.length]!;
    if (k % PER_AGGREGATE === 0) aggregates[d] = ShardedId.generate("Customer", shard);
    rows[d]!.push(outboxRecord(shard, { topic: "bench", aggregateId: aggregates[d]!, payload: { i } }));
  }
  for (const [d, client] of clients.entries()) {
    for (let at = 0; at < rows[d]!.length; at += 5000) {
      await client.outboxEvent.createMany({ data: rows[d]!.slice(at, at + 5000) });
    }
  }
}

/** Drains `EVENTS` events from `n` databases with one started relay: events/s, duplicates, poll errors. */
async function drain(n: number) {
  const { clients, registry, pool } = registryOver(n);
  try {
    await retrying(async () => {
      await Promise.all(clients.map((c) => c.$executeRawUnsafe(`TRUNCATE "OutboxEvent"`)));
      await seed(clients, n);
    });
    // A relay's clients live long: each has connected and run a statement before the clock starts.
    await retrying(() => Promise.all(clients.map((c) => c.$queryRawUnsafe("SELECT 1"))));
    const seen = new Set<string>();
    let duplicates = 0;
    let errors = 0;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    const relay = createOutboxRelay({
      registry,
      telemetry: false,
      onError: (error) => {
        if (errors++ === 0) console.error(`${n} databases: a poll failed: ${(error as Error).message}`);
      },
      deliver: async (m) => {
        if (seen.has(m.id)) duplicates++;
        seen.add(m.id);
        if (seen.size === EVENTS) done();
      },
      ...EXTRA,
    });
    const sampled = peakConnections();
    const start = performance.now();
    relay.start();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      finished,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, 600_000);
      }),
    ]);
    const ms = performance.now() - start;
    clearTimeout(timer);
    await relay.stop();
    const connections = await sampled();
    if (seen.size < EVENTS) throw new Error(`${n} databases: ${seen.size} of ${EVENTS} delivered in 10 min`);
    return { rate: (EVENTS / ms) * 1000, duplicates, errors, pool, connections };
  } finally {
    await registry.disconnect();
  }
}

async function run() {
  const { rows } = await activity.query<{ max: string; others: number }>(
    "SELECT current_setting('max_connections') AS max, count(*)::int AS others FROM pg_stat_activity WHERE NOT datname = ANY($1)",
    [fleet.names],
  );
  console.error(
    `server: max_connections ${rows[0]!.max}, ${rows[0]!.others} connections of other work at start`,
  );
  const results = new Map<number, Awaited<ReturnType<typeof drain>>[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < SIZES.length; k++) {
      const n = SIZES[(round + k) % SIZES.length]!;
      const result = await drain(n);
      results.set(n, [...(results.get(n) ?? []), result]);
      console.error(
        `round ${round + 1}: ${n} databases, ${result.rate.toFixed(0)} events/s, ${result.duplicates} duplicates, ${result.errors} poll errors, ${result.connections} connections at most`,
      );
    }
  }
  const rateOf = (n: number) => median(results.get(n)!.map((r) => r.rate));
  const base = rateOf(1);
  console.log(`\n${EVENTS} events, ${ROUNDS} rounds, relay options ${JSON.stringify(EXTRA)}`);
  console.log(
    "| databases | pool each | events/s (median) | ratio to 1 database | all rounds | duplicates | poll errors | peak connections |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const n of SIZES) {
    const rs = results.get(n)!;
    console.log(
      `| ${n} | ${rs[0]!.pool} | ${rateOf(n).toFixed(0)} | ${(rateOf(n) / base).toFixed(2)} | ${rs.map((r) => r.rate.toFixed(0)).join(", ")} | ${rs.reduce((s, r) => s + r.duplicates, 0)} | ${rs.reduce((s, r) => s + r.errors, 0)} | ${Math.max(...rs.map((r) => r.connections))} |`,
    );
  }
  await idle(Math.max(...SIZES));
}

/** The claims a started relay sends to `n` idle databases over `IDLE_MS`. */
async function idle(n: number) {
  let claims = 0;
  const { clients, registry } = registryOver(n, (sql) => {
    if (sql.includes("WITH claimed AS")) claims++;
  });
  try {
    await retrying(() => Promise.all(clients.map((c) => c.$executeRawUnsafe(`TRUNCATE "OutboxEvent"`))));
    const relay = createOutboxRelay({ registry, telemetry: false, deliver: async () => {}, ...EXTRA });
    relay.start();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    await relay.stop();
    console.log(
      `\nidle: ${claims} claims to ${n} empty databases in ${IDLE_MS / 1000} s (${(claims / n).toFixed(1)} per database, ${((claims / IDLE_MS) * 1000).toFixed(1)}/s in all)`,
    );
  } finally {
    await registry.disconnect();
  }
}
