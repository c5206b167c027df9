import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { type Drawn, loadDatabase, loadRows, totals, windowsOf } from "../../test/load-rows.js";
import type { ShardLoadWindow } from "./read.js";
import { HORIZON_TABLE, ROLLUP_FUNCTION_NAME, ROLLUP_TABLE } from "./rollup.js";
import { CREATE_LOAD_TABLE } from "./schema.js";
import { FLUSH_LOAD } from "./sql.js";
import { SUM_KEPT } from "./sum-sql.js";
import { sumShardLoad, sumWindows } from "./summary.js";

const name = `ld_horizon_${process.pid}`;
const db = loadDatabase(name);
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** 60 windows of 10 s, one every 10 s from `t0` + `offsetMs`, over three shards and four routers. */
function windows(t0: number, offsetMs = 0): ShardLoadWindow[] {
  const list: Drawn[] = Array.from({ length: 60 }, (_, i) => ({
    shard: ["0/0", "0/1", "2/5"][i % 3]!,
    router: `r${i % 4}`,
    offsetMs: offsetMs + i * 10_000,
    lengthMs: 10_000,
    calls: 1 + i,
    latency: 2,
    key: i % 3,
  }));
  return windowsOf(t0, list);
}

async function write(list: readonly ShardLoadWindow[]) {
  await db.admin.query(FLUSH_LOAD, [loadRows(list), new Date(0).toISOString()]);
}

const rollUp = (at: number) =>
  db.admin.query(`SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, $2)`, [365 * DAY, new Date(at)]);

async function horizons(): Promise<Record<number, number>> {
  const { rows } = await db.admin.query(
    `SELECT bucket_ms, (extract(epoch FROM complete_from) * 1000)::float8 AS t FROM ${HORIZON_TABLE}`,
  );
  return Object.fromEntries(rows.map((r: { bucket_ms: number; t: number }) => [r.bucket_ms, r.t]));
}

/** The load read over `[from, to)` and the resolution read, beside what the windows themselves sum to there. */
async function read(all: readonly ShardLoadWindow[], from: number, to: number) {
  const sum = await sumShardLoad(db.client, { since: new Date(from), until: new Date(to) });
  const expected = totals(sumWindows(all, { from, to }).shards);
  return { resolution: sum.resolutionMs, totals: totals(sum.shards), expected };
}

describe("load rollups' horizons", () => {
  it(
    "a span that ended days ago is read from the finest resolution still complete from its start, with the windows' totals",
    async () => {
      await db.recreateLoadTables();
      const { rows } = await db.admin.query("SELECT (extract(epoch FROM now()) * 1000)::float8 AS now");
      const now = Number(rows[0].now);
      const t = Math.floor((now - 3 * DAY) / HOUR) * HOUR; // three days ago, on the hour
      const all = windows(t);
      await write(all);
      await rollUp(t + 17 * MINUTE); // every window rolled up, into every resolution
      await rollUp(now); // 10 s buckets older than an hour deleted, 1 min ones older than a day
      const h = await horizons();
      // The last window ends 10 min after t: the finer resolutions are complete from after it.
      expect(h[10_000]).toBeGreaterThanOrEqual(t + 10 * MINUTE);
      expect(h[60_000]).toBeGreaterThanOrEqual(t + 10 * MINUTE);
      expect([h[600_000], h[3_600_000]]).toEqual([-Infinity, -Infinity]);
      const { rows: left } = await db.admin.query(
        `SELECT bucket_ms, count(*)::int AS n FROM ${ROLLUP_TABLE} GROUP BY 1 ORDER BY 1`,
      );
      expect(left.map((r: { bucket_ms: number }) => r.bucket_ms)).toEqual([600_000, 3_600_000]);

      // 16 min (10 s by its length), 3 h (1 min), and three days ago until two days ago (1 h).
      for (const [from, to, resolution] of [
        [t - 3 * MINUTE, t + 13 * MINUTE, 600_000],
        [t, t + 3 * HOUR, 600_000],
        [t, t + DAY, 3_600_000],
      ] as const) {
        const r = await read(all, from, to);
        expect(r.resolution).toBe(resolution);
        expect(r.totals).toEqual(r.expected);
        expect(r.totals.reduce((n, s) => n + s.calls, 0)).toBe((60 * 61) / 2);
      }
      // Without the horizons (a resolution taken as kept from the span's end), the 16 min span
      // would read the 10 s buckets deleted since: nothing.
      const { rows: kept } = await db.admin.query(SUM_KEPT, [
        new Date(t - 3 * MINUTE),
        null,
        new Date(t + 13 * MINUTE),
        16,
        null,
      ]);
      expect([kept[0].tier_ms, kept[0].shards]).toEqual([10_000, []]);
    },
    patient(60_000),
  );

  it(
    "rollups of an earlier version: read without horizons, then given some from what each resolution holds",
    async () => {
      await db.recreateLoadTables();
      const t = Date.parse("2026-03-01T12:00:00Z");
      const first = windows(t);
      await write(first);
      await rollUp(t + 17 * MINUTE);
      // What an earlier version leaves: no horizons' table, 10 s buckets deleted up to t + 5 min, and
      // (as if the 1 h resolution were new in this version) no 1 h buckets.
      await db.admin.query(`DROP TABLE ${HORIZON_TABLE}`);
      await db.admin.query(
        `DELETE FROM ${ROLLUP_TABLE} WHERE bucket_ms = 3600000 OR (bucket_ms = 10000 AND bucket_start < $1)`,
        [new Date(t + 5 * MINUTE)],
      );
      const before = await read(first, t + 5 * MINUTE, t + 21 * MINUTE);
      expect(before.resolution).toBe(10_000);
      expect(before.totals).toEqual(before.expected);

      // A router of this version sets up and rolls up windows of half an hour later.
      for (const ddl of CREATE_LOAD_TABLE) await db.admin.query(ddl);
      const second = windows(t, 30 * MINUTE);
      await write(second);
      await rollUp(t + 47 * MINUTE);
      expect(await horizons()).toEqual({
        10000: t + 5 * MINUTE, // its oldest bucket
        60000: t,
        600000: t,
        3600000: t + HOUR, // the end of what was rolled up before it, on its bucket's boundary
      });
      const all = [...first, ...second];
      for (const [from, to, resolution] of [
        [t + 5 * MINUTE, t + 21 * MINUTE, 10_000],
        [t, t + 50 * MINUTE, 60_000],
        // Two days: 1 h buckets by its length, but they hold only the second half hour.
        [t, t + 2 * DAY, 600_000],
      ] as const) {
        const r = await read(all, from, to);
        expect(r.resolution).toBe(resolution);
        expect(r.totals).toEqual(r.expected);
      }
    },
    patient(60_000),
  );
});
