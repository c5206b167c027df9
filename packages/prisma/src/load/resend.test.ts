import { ShardIdentifier } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import { loadDatabase } from "../../test/load-rows.js";
import type { ShardLayout } from "../planner.js";
import { loadOptionsOf } from "./options.js";
import { LoadRecorder } from "./recorder.js";
import { ROLLUP_TABLE } from "./rollup.js";
import { LOAD_TABLE, MOVED_TABLE } from "./sql.js";
import { sumShardLoad } from "./summary.js";

const name = `ld_resend_${process.pid}`;
const db = loadDatabase(name);
const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)];
const layout: ShardLayout = {
  resolve: (s) => s,
  databases: [{ index: 0, shards }],
  databaseOf: () => ({ index: 0 }),
};

beforeEach(() => db.recreateLoadTables());

/**
 * The database's client, through which a flush's statement can fail before it runs (`refuse`) or
 * have its answer lost after it committed (`lose`): the two outcomes a router cannot tell apart.
 */
function unreliable() {
  const state = { refuse: false, lose: false };
  const through = {
    async $executeRawUnsafe(sql: string, ...values: unknown[]) {
      if (state.refuse) throw new Error("connection refused");
      const done = await db.client.$executeRawUnsafe(sql, ...values);
      if (state.lose && sql.includes(LOAD_TABLE)) throw new Error("connection lost before the answer");
      return done;
    },
  };
  const load = new LoadRecorder(
    { layout, databases: [{ client: through, name }], keysOf: () => ["id"] },
    loadOptionsOf({ intervalMs: 600_000 }, "load", [])!,
  );
  return { state, load };
}

/** `n` calls counted on each shard. */
function count(load: LoadRecorder, n: number) {
  for (let i = 0; i < n; i++) for (const s of shards) load.note([s], "findUnique", 1, null, true, undefined);
}

/** A router that counted `n` calls on each shard and flushed them, the answer lost after the commit. */
async function lostAnswer(n: number): Promise<LoadRecorder> {
  const { state, load } = unreliable();
  count(load, n);
  state.lose = true;
  expect((await load.flush()).map((r) => r.status)).toEqual(["failed"]);
  state.lose = false;
  await load.idle();
  return load;
}

async function calls(): Promise<number[]> {
  const sum = await sumShardLoad(db.client, { spanMs: 3_600_000 });
  return sum.shards.map((s) => Math.round(s.calls * 1e6) / 1e6);
}

const rollUpLater = async () => {
  const { rows } = await db.admin.query(
    "SELECT shardkit.load_rollup($1, 16, now() + interval '10 minutes') AS n",
    [365 * 86_400_000],
  );
  return Number(rows[0].n);
};

describe("a flush with no known outcome", { timeout: patient(60_000) }, () => {
  it("its answer lost after it committed: sent again as it was, counted once though a rollup moved the first copy", async () => {
    const load = await lostAnswer(5);
    // Written all the same, then rolled up before the router could send it again.
    expect(await rollUpLater()).toBe(2);
    const moved = await db.admin.query(`SELECT router FROM ${MOVED_TABLE}`);
    expect(moved.rows).toEqual([{ router: load.router }]);
    count(load, 3);
    // The first flush sends the lost batch again (recognised, skipped), the next the calls since.
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    expect((await db.admin.query(`SELECT 1 FROM ${LOAD_TABLE}`)).rows).toEqual([]);
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    await load.idle();
    expect(await calls()).toEqual([8, 8]);
    await load.close();
  });

  it("sent again while a rollup is moving its first copy: it waits for the rollup's end, and is counted once", async () => {
    const load = await lostAnswer(5);
    // A rollup of another router, under way: it has moved the first copy and not committed yet.
    const roller = new pg.Client({ connectionString: db.url });
    await roller.connect();
    try {
      await roller.query("BEGIN");
      const { rows } = await roller.query(
        "SELECT shardkit.load_rollup($1, 16, now() + interval '10 minutes') AS n",
        [365 * 86_400_000],
      );
      expect(Number(rows[0].n)).toBe(2);
      const resent = load.flush();
      await eventually("the batch sent again waits for the rollup", async () => {
        const waiting = await db.admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return waiting.rows[0].n === 1;
      });
      await roller.query("COMMIT");
      await resent;
    } finally {
      await roller.end();
    }
    await load.idle();
    await load.flush(); // whatever the router still holds
    await load.idle();
    await rollUpLater();
    expect(await calls()).toEqual([5, 5]);
    await load.close();
  });

  it("its answer lost, the first copy still in the windows: replaced by itself, counted once", async () => {
    const load = await lostAnswer(4);
    count(load, 2);
    expect((await load.flush()).map((r) => r.status)).toEqual(["written"]);
    expect((await load.flush()).map((r) => r.status)).toEqual(["written"]);
    await load.idle();
    expect(await calls()).toEqual([6, 6]);
    await load.close();
  });

  it("closed after a lost answer: the close sends the batch again and the windows since, each once", async () => {
    const load = await lostAnswer(4);
    count(load, 2);
    expect((await load.close()).map((r) => r.status)).toEqual(["written"]);
    await load.idle();
    expect(await calls()).toEqual([6, 6]);
  });

  it("refused many times over: the router holds the batch sent and one of the windows since, then writes both", async () => {
    const { state, load } = unreliable();
    state.refuse = true;
    for (let i = 0; i < 30; i++) {
      count(load, 1);
      const [result] = await load.flush();
      expect(result!.status).toBe("failed");
      await load.idle();
    }
    state.refuse = false;
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    await load.idle();
    // Two windows per shard: the first one sent, and the 29 after it merged (ordered by their
    // counts: their starts, milliseconds apart, each moved by the clock difference its flush measured,
    // may come in either order).
    const windows = await db.admin.query(
      `SELECT shard, calls::int AS calls FROM ${LOAD_TABLE} ORDER BY shard, calls`,
    );
    expect(windows.rows).toEqual([
      { shard: 0, calls: 1 },
      { shard: 0, calls: 29 },
      { shard: 1, calls: 1 },
      { shard: 1, calls: 29 },
    ]);
    expect(await calls()).toEqual([30, 30]);
    expect((await db.admin.query(`SELECT 1 FROM ${ROLLUP_TABLE}`)).rows).toEqual([]);
    await load.close();
  });
});
