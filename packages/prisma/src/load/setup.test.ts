// The load ledger's set-up on a database that other versions set up or still use: the batches-moved
// table of an earlier version changed in place, and the rollup function of each version left to its
// own routers (a rolling upgrade).
import { createHash } from "node:crypto";
import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { loadDatabase, loadRows, windowsOf } from "../../test/load-rows.js";
import { ROLLUP_FUNCTION, ROLLUP_FUNCTION_NAME, ROLLUP_VERSION, rollUpLoad } from "./rollup.js";
import { CREATE_LOAD_TABLE, DROP_LOAD_TABLES } from "./schema.js";
import { FLUSH_LOAD, MOVED_KEPT_MS, MOVED_TABLE } from "./sql.js";

const name = `ld_setup_${process.pid}`;
const db = loadDatabase(name);

const setUp = async () => {
  for (const ddl of CREATE_LOAD_TABLE) await db.admin.query(ddl);
};

/** A window of 5 calls on shard 0/0 that ended `agoMs` ago by the database's clock. */
async function window(agoMs: number) {
  const [w] = windowsOf(Date.now() - agoMs - 10_000, [
    { shard: "0/0", router: "r1", offsetMs: 0, lengthMs: 10_000, calls: 5, latency: 1, key: 0 },
  ]);
  await db.admin.query(FLUSH_LOAD, [loadRows([w!]), new Date(0).toISOString()]);
}

const definition = async (fn: string): Promise<string> =>
  (await db.admin.query("SELECT pg_get_functiondef($1::text::regproc) AS d", [fn])).rows[0].d;

/** The batches remembered as moved after a rollup as the database would run it `laterMs` from now. */
async function movedAfterRollup(laterMs: number): Promise<string[]> {
  await db.admin.query(`SELECT ${ROLLUP_FUNCTION_NAME}($1, 16, now() + $2 * interval '1 millisecond')`, [
    365 * 86_400_000,
    laterMs,
  ]);
  return (await db.admin.query(`SELECT router FROM ${MOVED_TABLE} ORDER BY router`)).rows.map(
    (r) => r.router,
  );
}

describe("the load ledger's set-up", { timeout: patient(60_000) }, () => {
  it("an earlier version's batches-moved table gains when each was moved, by the set-up's clock, and is kept a day from it", async () => {
    await db.admin.query(DROP_LOAD_TABLES);
    // What an earlier version made, with a batch it moved, stamped 30 hours back by its router.
    await db.admin.query(`CREATE SCHEMA IF NOT EXISTS shardkit;
      CREATE TABLE ${MOVED_TABLE} (router_start timestamptz NOT NULL, router text NOT NULL,
        CONSTRAINT "ShardLoadMoved_pkey" PRIMARY KEY (router_start, router));
      INSERT INTO ${MOVED_TABLE} VALUES (now() - interval '30 hours', 'behind:1:x')`);
    await setUp();
    const { rows } = await db.admin.query(
      `SELECT router, extract(epoch FROM now() - moved_at)::float8 AS age FROM ${MOVED_TABLE}`,
    );
    expect(rows.map((r) => r.router)).toEqual(["behind:1:x"]);
    expect(rows[0].age).toBeGreaterThanOrEqual(0);
    expect(rows[0].age).toBeLessThan(60);
    // Remembered (its router's stamp, 30 hours back, is not what counts) until a day after the set-up.
    expect(await movedAfterRollup(MOVED_KEPT_MS - 60_000)).toEqual(["behind:1:x"]);
    expect(await movedAfterRollup(MOVED_KEPT_MS + 60_000)).toEqual([]);
  });

  it("an earlier router's set-up replaces its own rollup function, never this version's; this one's leaves a later one's", async () => {
    await db.recreateLoadTables();
    const ours = await definition(ROLLUP_FUNCTION_NAME);
    // What a router of the first version runs at set-up: its own function, under its own name.
    await db.admin.query(`CREATE OR REPLACE FUNCTION shardkit.load_rollup(retain_ms double precision,
        top_keys integer DEFAULT 16, as_of timestamptz DEFAULT now())
      RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN 0; END $$`);
    expect(await definition(ROLLUP_FUNCTION_NAME)).toBe(ours);
    // This version's rollup still runs its own body: the window moves, and is remembered as moved.
    await window(120_000);
    expect(await rollUpLoad(db.client)).toBe(1);
    expect((await db.admin.query(`SELECT router FROM ${MOVED_TABLE}`)).rows).toEqual([{ router: "r1" }]);
    // A later version's function, already there, is left as it is by this version's set-up.
    const later = `shardkit.load_rollup_v${ROLLUP_VERSION + 1}`;
    await db.admin.query(`CREATE FUNCTION ${later}(retain_ms double precision, top_keys integer DEFAULT 16,
        as_of timestamptz DEFAULT now()) RETURNS integer LANGUAGE sql AS $$ SELECT 42 $$`);
    const theirs = await definition(later);
    await setUp();
    expect(await definition(later)).toBe(theirs);
  });

  it("the rollup function's body is the one its version names (a changed body takes a new version)", () => {
    const digest = createHash("sha256").update(ROLLUP_FUNCTION).digest("hex").slice(0, 16);
    const bodies: Record<number, string> = { 2: "3d2a38503b2b8133" };
    expect(digest, `the rollup's body changed: bump ROLLUP_VERSION (now ${ROLLUP_VERSION})`).toBe(
      bodies[ROLLUP_VERSION],
    );
  });
});
