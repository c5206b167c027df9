import { ShardIdentifier } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import { loadDatabase } from "../../test/load-rows.js";
import type { ShardLayout } from "../planner.js";
import { loadOptionsOf } from "./options.js";
import { LoadRecorder } from "./recorder.js";
import { ROLLUP_FUNCTION_NAME, ROLLUP_TABLE } from "./rollup.js";
import { LOAD_TABLE, MOVED_TABLE, RESEND_FOR_MS } from "./sql.js";
import { sumShardLoad } from "./summary.js";

const name = `ld_resend_${process.pid}`;
const db = loadDatabase(name);
const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)];
const layout: ShardLayout = {
  resolve: (s) => s,
  databases: [{ index: 0, shards }],
  databaseOf: () => ({ index: 0 }),
};

const MINUTE = 60_000;
const HOUR = 3_600_000;
/** Reads that see windows a skewed router's clock placed hours back. */
const TWO_DAYS = 48 * HOUR;

beforeEach(() => db.recreateLoadTables());

/**
 * The database's client, through which a flush's statement can fail before it runs (`refuse`) or
 * have its answer lost after it committed (`lose`): the two outcomes a router cannot tell apart.
 */
function unreliable(offsetMs = 0) {
  // `later`: how far the router's clock has moved on since (the test's time passing).
  const state = { refuse: false, lose: false, later: 0 };
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
    () => Date.now() + offsetMs + state.later,
    () => performance.now() + state.later,
  );
  return { state, load };
}

/** `n` calls counted on each shard. */
function count(load: LoadRecorder, n: number) {
  for (let i = 0; i < n; i++) for (const s of shards) load.note([s], "findUnique", 1, null, true, undefined);
}

/** A router that counted `n` calls on each shard and flushed them, the answer lost after the commit. */
async function lostAnswer(n: number, offsetMs = 0) {
  const router = unreliable(offsetMs);
  count(router.load, n);
  router.state.lose = true;
  expect((await router.load.flush()).map((r) => r.status)).toEqual(["failed"]);
  router.state.lose = false;
  await router.load.idle();
  return router;
}

/** Each shard's calls summed over the last `spanMs` of the database's clock. */
async function calls(spanMs = 3_600_000): Promise<number[]> {
  const sum = await sumShardLoad(db.client, { spanMs });
  return sum.shards.map((s) => Math.round(s.calls * 1e6) / 1e6);
}

/** A rollup as the database would run it `laterMs` from now (by its own clock): the windows moved. */
const rollUpAt = async (laterMs: number) => {
  const { rows } = await db.admin.query(
    `SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, now() + $2 * interval '1 millisecond') AS n`,
    [365 * 86_400_000, laterMs],
  );
  return Number(rows[0].n);
};
const rollUpLater = () => rollUpAt(10 * MINUTE);

describe("a flush with no known outcome", { timeout: patient(60_000) }, () => {
  it("its answer lost after it committed: sent again as it was, counted once though a rollup moved the first copy", async () => {
    const { load } = await lostAnswer(5);
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
    const { load } = await lostAnswer(5);
    // A rollup of another router, under way: it has moved the first copy and not committed yet.
    const roller = new pg.Client({ connectionString: db.url });
    await roller.connect();
    try {
      await roller.query("BEGIN");
      const { rows } = await roller.query(
        `SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, now() + interval '10 minutes') AS n`,
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
    const { load } = await lostAnswer(4);
    count(load, 2);
    expect((await load.flush()).map((r) => r.status)).toEqual(["written"]);
    expect((await load.flush()).map((r) => r.status)).toEqual(["written"]);
    await load.idle();
    expect(await calls()).toEqual([6, 6]);
    await load.close();
  });

  it("closed after a lost answer: the close sends the batch again and the windows since, each once", async () => {
    const { load } = await lostAnswer(4);
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

  // The router sends a batch again for `RESEND_FOR_MS` from its first send, by its own clock; the
  // database remembers a batch moved for `MOVED_KEPT_MS` from the move, by its own: neither clock is
  // compared with the other, so no skew makes the router send again a batch the database forgot.
  it.each([
    ["an hour ahead", HOUR],
    ["ten minutes behind", -10 * MINUTE],
    ["13 hours behind", -13 * HOUR],
  ])("a router %s sends a moved batch again just before it gives up: counted once", async (_, offsetMs) => {
    const { state, load } = await lostAnswer(5, offsetMs);
    expect(await rollUpAt(10 * MINUTE)).toBe(2);
    // The database unreachable until just before the router gives up; a rollup runs then.
    state.later = RESEND_FOR_MS - 5 * MINUTE;
    await rollUpAt(state.later);
    count(load, 3);
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    await load.idle();
    await rollUpAt(state.later + 10 * MINUTE);
    expect(await calls(TWO_DAYS)).toEqual([8, 8]);
    await load.close();
  });

  it("windows held for hours behind a batch refused: sent, refused once, then sent again, not given up", async () => {
    const { state, load } = unreliable(-10 * MINUTE);
    count(load, 5);
    state.refuse = true;
    expect((await load.flush()).map((r) => r.status)).toEqual(["failed"]);
    // Refused for 11 hours; the windows since wait behind the batch sent.
    state.later = 11 * HOUR;
    count(load, 3);
    expect((await load.flush()).map((r) => r.status)).toEqual(["failed"]);
    state.refuse = false;
    state.later += MINUTE;
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    await load.idle();
    // The windows held (since the first send, 11 hours back) are sent first now: refused once.
    state.refuse = true;
    state.later = 12 * HOUR + MINUTE;
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["failed", 2]]);
    await load.idle();
    state.refuse = false;
    state.later += MINUTE;
    expect((await load.flush()).map((r) => [r.status, r.rows])).toEqual([["written", 2]]);
    await load.idle();
    expect(await calls(TWO_DAYS)).toEqual([8, 8]);
    await load.close();
  });
});
