// Routers whose clocks are off (one an hour ahead, one ten minutes behind) still count where their
// calls went: their windows are stamped by the database's clock, so the load the balancer reads
// over the last minutes gives each database the share of the calls the test made there, and the
// share PostgreSQL itself counted (pg_stat_database's commits); each skewed router is named.
import { ShardIdentifier } from "@shardkit/id";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { loadTableDatabases } from "../../test/load-rows.js";
import type { ShardLayout } from "../planner.js";
import { loadOptionsOf } from "./options.js";
import { LoadRecorder } from "./recorder.js";
import { mergeShardLoad, skewedRouters, sumShardLoad } from "./summary.js";

const names = [`ld_clock_a_${process.pid}`, `ld_clock_b_${process.pid}`];
const A = ShardIdentifier.of(0, 0);
const B = ShardIdentifier.of(0, 1);

const databases = loadTableDatabases(names);

/** 0/0 on the first database, 0/1 on the second. */
const layout: ShardLayout = {
  resolve: (shard) => shard,
  databases: [
    { index: 0, shards: [A] },
    { index: 1, shards: [B] },
  ],
  databaseOf: (shard) => ({ index: shard.equals(A) ? 0 : 1 }),
};

/** A router whose clock is `offsetMs` off the machine's. */
function recorder(offsetMs: number): LoadRecorder {
  const options = loadOptionsOf({ intervalMs: 600_000 }, "load", [])!;
  return new LoadRecorder(
    {
      layout,
      databases: databases.clients.map((client, i) => ({ client, name: names[i]! })),
      keysOf: () => ["id"],
    },
    options,
    () => Date.now() + offsetMs,
  );
}

/** `n` real statements (one transaction each) on `shard`'s database, counted by `load`. */
async function calls(load: LoadRecorder, shard: ShardIdentifier, n: number) {
  const client = databases.clients[shard.equals(A) ? 0 : 1]!;
  for (let i = 0; i < n; i++) await load.timed(client.$queryRawUnsafe("SELECT 1"), [shard], "queryRaw");
}

/** Each database's commits so far, read from another database (reading them is a commit too). */
async function commits(): Promise<number[]> {
  const c = new pg.Client({ connectionString: databases.urls[0]!.replace(names[0]!, "postgres") });
  await c.connect();
  try {
    await c.query("SELECT pg_stat_clear_snapshot()");
    const { rows } = await c.query<{ datname: string; n: string }>(
      "SELECT datname, xact_commit::text AS n FROM pg_stat_database WHERE datname = ANY($1)",
      [names],
    );
    return names.map((n) => Number(rows.find((r) => r.datname === n)?.n ?? 0));
  } finally {
    await c.end();
  }
}

describe("load windows stamped by the database's clock", () => {
  it("a router an hour ahead and one ten minutes behind count where their calls went, and are named", async () => {
    const ahead = recorder(3_600_000);
    const behind = recorder(-600_000);
    const right = recorder(0);
    // Each statement of `calls` is a transaction: the load counted and PostgreSQL's commits agree
    // (a few commits of the set-up and the flushes are counted too: well within 5% of 1,000).
    const before = await commits();
    await calls(ahead, A, 400);
    await calls(behind, B, 300);
    await calls(right, A, 200);
    await calls(right, B, 100);
    for (const load of [ahead, behind, right]) {
      const results = await load.flush();
      expect(results.map((r) => r.status)).toEqual(results.map(() => "written"));
    }

    // What the balancer reads: the last 5 minutes of each database's clock, summed per shard.
    const sums = await Promise.all(databases.clients.map((c) => sumShardLoad(c, { spanMs: 300_000 })));
    const shards = new Map(mergeShardLoad(sums).map((s) => [s.key, s.calls]));
    expect(shards.get(A.key)).toBe(600);
    expect(shards.get(B.key)).toBe(400);
    const share = 600 / 1000;

    // PostgreSQL's own count: the commits on each database since (at least the statements made).
    let delta = [0, 0];
    await eventually("PostgreSQL to count the statements' commits", async () => {
      const after = await commits();
      delta = after.map((n, i) => n - before[i]!);
      return delta[0]! >= 600 && delta[1]! >= 400;
    });
    const pgShare = delta[0]! / (delta[0]! + delta[1]!);
    expect(Math.abs(share - pgShare), `commits ${delta.join(", ")}`).toBeLessThan(0.05);

    const skewed = skewedRouters(sums);
    expect(skewed.map((r) => r.router)).toEqual([ahead.router, behind.router]);
    expect(skewed[0]!.skewMs).toBeGreaterThan(3_590_000);
    expect(skewed[0]!.skewMs).toBeLessThan(3_610_000);
    expect(skewed[1]!.skewMs).toBeGreaterThan(-610_000);
    expect(skewed[1]!.skewMs).toBeLessThan(-590_000);
  });

  it("a window sent again after a flush whose answer came late replaces itself, stamped anew", async () => {
    const load = recorder(3_600_000);
    await calls(load, A, 5);
    const first = await load.flush();
    expect(first[0]!.status).toBe("written");
    // The same window sent again, as a retry would (its router's stamp is the same).
    const [row] = await databases.clients[0]!.$queryRawUnsafe<{ router_start: Date }[]>(
      `SELECT router_start FROM shardkit."ShardLoad" WHERE router = $1`,
      load.router,
    );
    const { FLUSH_LOAD } = await import("./sql.js");
    const resend = JSON.stringify([
      {
        shard: A.bits,
        window_start: row!.router_start.toISOString(),
        window_ms: 1000,
        router: load.router,
        calls: 5,
        writes: 0,
        rows_written: 0,
        db_ms: 1,
        sketch: { alpha: 0.02, min: 0.001, buckets: [] },
        top: [],
        config: "c",
        sent_at: new Date(Date.now() + 3_600_000).toISOString(),
      },
    ]);
    await databases.clients[0]!.$executeRawUnsafe(FLUSH_LOAD, resend, new Date(0).toISOString());
    const rows = await databases.clients[0]!.$queryRawUnsafe<{ calls: bigint }[]>(
      `SELECT calls FROM shardkit."ShardLoad" WHERE router = $1`,
      load.router,
    );
    expect(rows.map((r) => Number(r.calls))).toEqual([5]);
  });
});
