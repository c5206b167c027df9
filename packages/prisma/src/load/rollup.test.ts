// Rollups keep every count: the load read at each resolution after windows are rolled up (in one go,
// in several, by many connections at once, or by one killed halfway) equals the windows' own sum, and
// still does once old buckets are deleted (read from a resolution complete from the span's start); a
// table of the old shape is changed in place by routers setting up together; a router's flush rolls
// up what is past the lag.
import { spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import fc from "fast-check";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { type Drawn, loadDatabase, loadRows, totals, windowArb, windowsOf } from "../../test/load-rows.js";
import type { ShardLayout } from "../planner.js";
import { LOCKS } from "../shared.js";
import { loadOptionsOf } from "./options.js";
import type { ShardLoadWindow } from "./read.js";
import { LoadRecorder } from "./recorder.js";
import { HORIZON_TABLE, ROLLUP_FUNCTION_NAME, ROLLUP_TABLE } from "./rollup.js";
import { CREATE_LOAD_TABLE } from "./schema.js";
import { FLUSH_LOAD, LOAD_TABLE } from "./sql.js";
import { sumShardLoad, sumWindows } from "./summary.js";

const name = `ld_rollup_${process.pid}`;
const db = loadDatabase(name);
beforeAll(async () => {
  for (const ddl of CREATE_LOAD_TABLE) await db.admin.query(ddl);
}, patient(60_000));

const T0 = Date.parse("2026-01-01T12:00:00Z");
/** After every window of these tests and its lag: a rollup at this time moves them all. */
const LATER = new Date(T0 + 17 * 60_000);

/** No load: every table of the ledger emptied (the batches moved too: these tests reuse routers' stamps). */
async function clear() {
  await db.recreateLoadTables();
}

async function write(windows: readonly ShardLoadWindow[]) {
  await db.admin.query(FLUSH_LOAD, [loadRows(windows), new Date(0).toISOString()]);
}

const rollUp = async (at: Date, connection: pg.Client = db.admin) =>
  Number(
    (await connection.query(`SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, $2) AS n`, [365 * 86_400_000, at]))
      .rows[0].n,
  );

/** The end of the spans read: after every window of these tests. */
const UNTIL = new Date(T0 + 13 * 60_000);
/** Spans that read each resolution (10 s, 1 min, 10 min, 1 h) around every window, ending at `UNTIL`. */
const SPANS = [16 * 60_000, 3 * 3_600_000, 10 * 3_600_000, 40 * 3_600_000];
const RESOLUTIONS = [10_000, 60_000, 600_000, 3_600_000];

async function readAll(spanMs: number) {
  return sumShardLoad(db.client, { until: UNTIL, spanMs, topKeys: 16 });
}

/**
 * Windows rolled up at random times, then all: each resolution reads what the windows sum to; then
 * once more `lateMs` later, deleting the buckets older than each resolution keeps: each span is read
 * from the finest resolution complete from its start (by the horizons), with the same totals.
 */
async function rolledAtRandomTimes(list: Drawn[], times: number[], lateMs: number) {
  await clear();
  const windows = windowsOf(T0, list);
  await write(windows);
  const expected = totals(
    sumWindows(windows, { from: UNTIL.getTime() - SPANS[0]!, to: UNTIL.getTime() }).shards,
  );
  for (const t of [...times].sort((x, y) => x - y)) await rollUp(new Date(T0 + t));
  await rollUp(LATER);
  const left = await db.admin.query(`SELECT count(*)::int AS n FROM ${LOAD_TABLE}`);
  expect(left.rows[0].n).toBe(0);
  for (const spanMs of SPANS) {
    const sum = await readAll(spanMs);
    expect(sum.resolutionMs).toBe(RESOLUTIONS[SPANS.indexOf(spanMs)]);
    expect(totals(sum.shards)).toEqual(expected);
  }
  await rollUp(new Date(LATER.getTime() + lateMs));
  const { rows } = await db.admin.query(
    `SELECT bucket_ms, ${"(extract(epoch FROM complete_from) * 1000)::float8"} AS t FROM ${HORIZON_TABLE}`,
  );
  const from = new Map(rows.map((r: { bucket_ms: number; t: number }) => [r.bucket_ms, r.t]));
  for (const spanMs of SPANS) {
    const sum = await readAll(spanMs);
    const since = UNTIL.getTime() - spanMs;
    const finest = RESOLUTIONS[SPANS.indexOf(spanMs)]!;
    const complete = RESOLUTIONS.filter((ms) => ms >= finest && from.get(ms)! <= since);
    expect(sum.resolutionMs).toBe(complete[0]);
    expect(totals(sum.shards)).toEqual(expected);
  }
}

describe("load rollups", () => {
  it(
    "keep every count: rolled up at random times, each resolution reads what the windows sum to, before and after old buckets go",
    () => {
      const times = fc.array(fc.integer({ min: 0, max: 20 * 60_000 }), { maxLength: 4 });
      const lists = fc.array(windowArb, { minLength: 1, maxLength: 40 });
      const late = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3 * 86_400_000 }));
      return fc.assert(fc.asyncProperty(lists, times, late, rolledAtRandomTimes), { numRuns: 25 });
    },
    patient(240_000),
  );

  it(
    "a rollup skips while another holds the lock, and many at once while windows arrive count each window once",
    async () => {
      await clear();
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      await holder.query("BEGIN");
      await holder.query(`SELECT pg_advisory_xact_lock(${LOCKS.loadRollup}, 0)`);
      await write(
        windowsOf(T0, [
          { shard: "0/0", router: "r1", offsetMs: 0, lengthMs: 10_000, calls: 5, latency: 1, key: 0 },
        ]),
      );
      expect(await rollUp(LATER)).toBe(-1);
      await holder.query("ROLLBACK");
      await holder.end();
      await clear();

      const rollers = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const c = new pg.Client({ connectionString: db.url });
          await c.connect();
          return c;
        }),
      );
      const all: ShardLoadWindow[] = [];
      let writing = true;
      const moved: number[] = [];
      const loops = rollers.map(async (c) => {
        while (writing) moved.push(await rollUp(LATER, c));
      });
      for (let batch = 0; batch < 20; batch++) {
        const windows = windowsOf(
          T0,
          Array.from({ length: 30 }, (_, i) => ({
            shard: ["0/0", "0/1", "2/5"][i % 3]!,
            router: `r${batch}`,
            offsetMs: (i * 17_000) % (10 * 60_000),
            lengthMs: 10_000 + (i % 4) * 9_000,
            calls: 1 + ((i * 31 + batch) % 97),
            latency: 1 + (i % 7),
            key: i % 5,
          })),
        );
        all.push(...windows);
        await write(windows);
      }
      writing = false;
      await Promise.all(loops);
      await rollUp(LATER);
      await Promise.all(rollers.map((c) => c.end()));
      expect(moved.filter((n) => n > 0).length).toBeGreaterThan(0);
      const expected = totals(
        sumWindows(all, { from: UNTIL.getTime() - SPANS[0]!, to: UNTIL.getTime() }).shards,
      );
      for (const spanMs of SPANS) expect(totals((await readAll(spanMs)).shards)).toEqual(expected);
    },
    patient(120_000),
  );

  it(
    "a rollup whose connection drops or whose process is killed halfway leaves every count once",
    async () => {
      await clear();
      const windows = windowsOf(
        T0,
        Array.from({ length: 60 }, (_, i) => ({
          shard: ["0/0", "0/1", "2/5"][i % 3]!,
          router: `r${i % 4}`,
          offsetMs: i * 13_000,
          lengthMs: 10_000,
          calls: 1 + i,
          latency: 2,
          key: i % 3,
        })),
      );
      // A first rollup makes the bucket rows the next one merges into.
      await write(windows.slice(0, 30));
      await rollUp(LATER);
      await write(windows.slice(30));
      const expected = totals(
        sumWindows(windows, { from: UNTIL.getTime() - SPANS[0]!, to: UNTIL.getTime() }).shards,
      );

      for (const stop of ["connection dropped", "process killed"] as const) {
        // A row lock on every 10 min bucket holds the rollup after it moved the windows, before it writes.
        const blocker = new pg.Client({ connectionString: db.url });
        await blocker.connect();
        await blocker.query("BEGIN");
        await blocker.query(`SELECT 1 FROM ${ROLLUP_TABLE} WHERE bucket_ms = 600000 FOR UPDATE`);
        const app = `rollup-${stop.replace(" ", "-")}-${process.pid}`;
        const child = spawn(
          process.execPath,
          [
            "--input-type=module",
            "-e",
            `import pg from "pg"; const c = new pg.Client({ connectionString: process.env.URL, application_name: process.env.APP });
           await c.connect(); await c.query("SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, $2)", [365 * 86400000, process.env.AT]);`,
          ],
          {
            // In the package, whose dependencies hold `pg` (a run from the repository's root has none).
            cwd: new URL("../..", import.meta.url).pathname,
            env: { ...process.env, URL: db.url, APP: app, AT: LATER.toISOString() },
            stdio: "ignore",
            detached: true,
          },
        );
        const exited = new Promise((resolve) => child.once("exit", resolve));
        let pid = 0;
        await eventually("the rollup to wait for the row lock", async () => {
          const { rows } = await db.admin.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
            [app],
          );
          pid = rows[0]?.pid ?? 0;
          return pid > 0;
        });
        if (stop === "connection dropped") await db.admin.query("SELECT pg_terminate_backend($1)", [pid]);
        process.kill(-child.pid!, "SIGKILL");
        await exited;
        await blocker.query("ROLLBACK");
        await blocker.end();
        await eventually("the rollup's backend to end", async () => {
          const { rows } = await db.admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid]);
          return rows.length === 0;
        });
        for (const spanMs of SPANS) expect(totals((await readAll(spanMs)).shards)).toEqual(expected);
      }
      await rollUp(LATER);
      const left = await db.admin.query(`SELECT count(*)::int AS n FROM ${LOAD_TABLE}`);
      expect(left.rows[0].n).toBe(0);
      for (const spanMs of SPANS) expect(totals((await readAll(spanMs)).shards)).toEqual(expected);
    },
    patient(120_000),
  );

  it(
    "a table of the old shape is changed in place by routers setting up at once: its rows kept, one primary key",
    async () => {
      const old = `ld_rollup_old_${process.pid}`;
      const oldUrl = await createDatabase(MAIN_PORT, old);
      const connect = async () => {
        const c = new pg.Client({ connectionString: oldUrl });
        await c.connect();
        return c;
      };
      const [a, b] = await Promise.all([connect(), connect()]);
      try {
        // What earlier versions made: the primary key (shard, window_start, router) beside the unique key.
        await a.query(`CREATE SCHEMA shardkit;
        CREATE TABLE ${LOAD_TABLE} (shard integer NOT NULL, window_start timestamptz NOT NULL, window_ms integer NOT NULL,
          router text NOT NULL, calls bigint NOT NULL, writes bigint NOT NULL, rows_written bigint NOT NULL,
          db_ms double precision NOT NULL, sketch jsonb NOT NULL, top jsonb NOT NULL, config text NOT NULL,
          PRIMARY KEY (shard, window_start, router));
        CREATE FUNCTION shardkit.load_window_end(start timestamptz, ms integer) RETURNS timestamptz
          LANGUAGE sql IMMUTABLE AS $$ SELECT start + ms * interval '1 millisecond' $$;
        ALTER TABLE ${LOAD_TABLE} ADD COLUMN window_end timestamptz
            GENERATED ALWAYS AS (shardkit.load_window_end(window_start, window_ms)) STORED,
          ADD COLUMN router_start timestamptz, ADD COLUMN skew_ms double precision;
        CREATE UNIQUE INDEX "ShardLoad_router_start_key" ON ${LOAD_TABLE} (shard, router, router_start);
        INSERT INTO ${LOAD_TABLE} VALUES
          (1, now() - interval '5 minutes', 10000, 'by-hand', 3, 0, 0, 1, '{}', '[]', 'c', DEFAULT, NULL, NULL),
          (1, now() - interval '4 minutes', 10000, 'r', 4, 0, 0, 1, '{}', '[]', 'c', DEFAULT, now() - interval '4 minutes', 0)`);
        // Read before any router of this version set it up: the windows, without rollups.
        const reader = new PrismaClient({ adapter: new PrismaPg({ connectionString: oldUrl, max: 1 }) });
        const before = await sumShardLoad(reader, { spanMs: 600_000 }).finally(() => reader.$disconnect());
        expect(before.shards.map((s) => [s.key, s.calls])).toEqual([["0/1", 7]]);
        await Promise.all(
          [a, b].map(async (c) => {
            for (const ddl of CREATE_LOAD_TABLE) await c.query(ddl);
          }),
        );
        const keys = await a.query(
          `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = '${LOAD_TABLE}'::regclass AND contype IN ('p', 'u')`,
        );
        expect(keys.rows).toEqual([
          { conname: "ShardLoad_router_start_key", def: "PRIMARY KEY (shard, router, router_start)" },
        ]);
        const rows = await a.query(`SELECT router, calls::int AS calls FROM ${LOAD_TABLE} ORDER BY router`);
        expect(rows.rows).toEqual([
          { router: "by-hand", calls: 3 },
          { router: "r", calls: 4 },
        ]);
        // Both roll up: the windows are counted in the rollups now.
        expect(await rollUp(new Date(Date.now() + 3_600_000), a)).toBe(2);
        const { rows: rolled } = await a.query(
          `SELECT sum(calls)::int AS n FROM ${ROLLUP_TABLE} WHERE bucket_ms = 60000`,
        );
        expect(rolled[0].n).toBe(7);
      } finally {
        await Promise.all([a.end(), b.end()]);
        await dropDatabase(MAIN_PORT, old);
      }
    },
    patient(60_000),
  );

  it(
    "a router's flush rolls up the windows past the lag, its own and other routers'",
    async () => {
      await clear();
      const shard = ShardIdentifier.of(0, 0);
      const layout: ShardLayout = {
        resolve: (s) => s,
        databases: [{ index: 0, shards: [shard] }],
        databaseOf: () => ({ index: 0 }),
      };
      // Another router's windows of 5 minutes ago, by the database's clock.
      const { rows } = await db.admin.query("SELECT now() AS now");
      const old = windowsOf(
        T0,
        [1, 2, 3].map((i) => ({
          shard: "0/0",
          router: "gone",
          offsetMs: i * 10_000,
          lengthMs: 10_000,
          calls: 10,
          latency: 1,
          key: 0,
        })),
      ).map((w) => ({
        ...w,
        windowStart: new Date(rows[0].now.getTime() - 300_000 + w.windowStart.getTime() - T0),
      }));
      await write(old);
      const load = new LoadRecorder(
        { layout, databases: [{ client: db.client, name }], keysOf: () => ["id"] },
        loadOptionsOf({ intervalMs: 600_000 }, "load", [])!,
      );
      await load.timed(db.client.$queryRawUnsafe("SELECT 1"), [shard], "queryRaw");
      expect((await load.flush()).map((r) => r.status)).toEqual(["written"]);
      await load.idle(); // the rollup it started
      const left = await db.admin.query(`SELECT router, calls::int AS calls FROM ${LOAD_TABLE}`);
      expect(left.rows).toEqual([{ router: load.router, calls: 1 }]);
      const sum = await sumShardLoad(db.client, { spanMs: 600_000 });
      // Rounded: a window across a 10 s boundary is counted in two parts (float shares).
      expect(sum.shards.map((s) => [s.key, Math.round(s.calls * 1e6) / 1e6, s.routers])).toEqual([
        ["0/0", 31, ["gone", load.router].sort()],
      ]);
      await load.close();
    },
    patient(60_000),
  );
});
