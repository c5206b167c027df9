// Load windows as the rows a router's flush sends (`FLUSH_LOAD`'s `$1`), for tests that write windows
// of their own making with the flush's statement, the databases holding the load table they write to,
// and windows drawn at random with their totals compared.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import type { ShardLoadWindow } from "../src/load/read.js";
import { CREATE_LOAD_TABLE, DROP_LOAD_TABLES } from "../src/load/schema.js";
import { LatencySketch } from "../src/load/sketch.js";
import type { LoadRow } from "../src/load/sql.js";
import { PrismaClient } from "./generated/prisma/client.js";

/** `windows` as flush rows, stamped by the database's clock as given (no `sent_at`). */
export function loadRows(windows: readonly ShardLoadWindow[]): string {
  const rows: LoadRow[] = windows.map((w) => ({
    shard: w.shard.bits,
    window_start: w.windowStart.toISOString(),
    window_ms: w.windowMs,
    router: w.router,
    calls: w.calls,
    writes: w.writes,
    rows_written: w.rowsWritten,
    db_ms: w.dbMs,
    sketch: w.sketch,
    top: w.top,
    config: w.config,
  }));
  return JSON.stringify(rows);
}

/** Per shard: the counts, routers, configurations and quantiles (rounded: float sums in another order). */
export function totals(
  shards: readonly {
    key: string;
    calls: number;
    writes: number;
    rowsWritten: number;
    dbMs: number;
    routers: string[];
    configs: string[];
    p50: number | undefined;
    p99: number | undefined;
    top: { key: string; count: number; error: number }[];
  }[],
) {
  const r = (n: number) => Math.round(n * 1e6) / 1e6;
  return shards.map((s) => ({
    key: s.key,
    calls: r(s.calls),
    writes: r(s.writes),
    rows: r(s.rowsWritten),
    dbMs: r(s.dbMs),
    routers: s.routers,
    configs: s.configs,
    p50: s.p50,
    p99: s.p99,
    // Lists never full here (fewer keys than kept): merged exactly, whatever the order of merging.
    top: s.top.map((t) => [t.key, r(t.count), r(t.error)]).sort(([x], [y]) => (x! < y! ? -1 : 1)),
  }));
}

/** A window drawn: within 10 minutes of the start, on one of three shards, from one of three routers. */
export const windowArb = fc.record({
  shard: fc.constantFrom("0/0", "0/1", "2/5"),
  router: fc.constantFrom("r1", "r2", "r3"),
  offsetMs: fc.integer({ min: 0, max: 10 * 60_000 }),
  lengthMs: fc.oneof(fc.constant(10_000), fc.integer({ min: 0, max: 100_000 })),
  calls: fc.integer({ min: 1, max: 1000 }),
  latency: fc.double({ min: 0.01, max: 500, noNaN: true }),
  key: fc.integer({ min: 0, max: 5 }),
});

export type Drawn = {
  shard: string;
  router: string;
  offsetMs: number;
  lengthMs: number;
  calls: number;
  latency: number;
  key: number;
};

/** The windows drawn, `offsetMs` after `t0`: one per shard, router and start. */
export function windowsOf(t0: number, list: readonly Drawn[]) {
  const seen = new Set<string>();
  const out: ShardLoadWindow[] = [];
  for (const w of list) {
    const start = t0 + w.offsetMs;
    const id = `${w.shard}|${w.router}|${start}`;
    if (seen.has(id)) continue; // one row per router stamp
    seen.add(id);
    const sketch = new LatencySketch();
    sketch.record(w.latency, w.calls);
    out.push({
      shard: ShardIdentifier.parse(w.shard),
      windowStart: new Date(start),
      windowMs: w.lengthMs,
      router: w.router,
      calls: w.calls,
      writes: Math.floor(w.calls / 3),
      rowsWritten: Math.floor(w.calls / 2),
      dbMs: w.calls * 1.5,
      sketch: sketch.toJSON(),
      top: [{ key: `k${w.key}`, count: Math.ceil(w.calls / 2), error: 0 }],
      config: w.router === "r3" ? "other" : "c",
    });
  }
  return out;
}

/**
 * Databases of the test's own (`names`) holding the load table, made before the file's tests and
 * dropped after them, each with a Prisma client: `databases.urls` and `databases.clients` once made.
 */
export function loadTableDatabases(names: readonly string[]): { urls: string[]; clients: PrismaClient[] } {
  const databases = { urls: [] as string[], clients: [] as PrismaClient[] };
  beforeAll(async () => {
    databases.urls = await Promise.all(names.map((n) => createDatabase(MAIN_PORT, n)));
    databases.clients = databases.urls.map(
      (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) }),
    );
    for (const c of databases.clients) for (const ddl of CREATE_LOAD_TABLE) await c.$executeRawUnsafe(ddl);
  }, patient(60_000));
  afterAll(async () => {
    for (const c of databases.clients) await c.$disconnect();
    for (const n of names) await dropDatabase(MAIN_PORT, n);
  }, patient(60_000));
  return databases;
}

/** A database of the test's own: its URL, a Prisma client and a connection of its own (`admin`) on it. */
export type LoadDatabase = {
  url: string;
  client: PrismaClient;
  admin: pg.Client;
  recreateLoadTables(): Promise<void>;
};

/**
 * A database of the test's own (`name`), made before the file's tests and dropped after them: its
 * fields are set once it is made. The load tables are the test's to make, by `recreateLoadTables`
 * (every table of the ledger dropped and made again, empty).
 */
export function loadDatabase(name: string): LoadDatabase {
  const database: LoadDatabase = {
    url: "",
    client: undefined as unknown as PrismaClient,
    admin: undefined as unknown as pg.Client,
    async recreateLoadTables() {
      await database.admin.query(DROP_LOAD_TABLES);
      for (const ddl of CREATE_LOAD_TABLE) await database.admin.query(ddl);
    },
  };
  beforeAll(async () => {
    database.url = await createDatabase(MAIN_PORT, name);
    database.client = new PrismaClient({ adapter: new PrismaPg({ connectionString: database.url, max: 2 }) });
    database.admin = new pg.Client({ connectionString: database.url });
    await database.admin.connect();
  }, patient(60_000));
  afterAll(async () => {
    await database.client?.$disconnect();
    await database.admin?.end();
    await dropDatabase(MAIN_PORT, name);
  }, patient(60_000));
  return database;
}
