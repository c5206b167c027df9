// The load ledger's set-up on a database that other versions set up or still use: the batches-moved
// table of an earlier version changed in place, the rollup function of each version left to its own
// routers (a rolling upgrade), and JIT kept off for the reads and the rollup.
import { createHash } from "node:crypto";
import { PrismaPg } from "@prisma/adapter-pg";
import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { loadDatabase, loadRows, windowsOf } from "../../test/load-rows.js";
import { JIT_OFF, JIT_OFF_OPTION, markJitOff, queryWithoutJit } from "./no-jit.js";
import { ROLLUP_FUNCTION, ROLLUP_FUNCTION_NAME, ROLLUP_VERSION, rollUpLoad } from "./rollup.js";
import { CREATE_LOAD_TABLE, DROP_LOAD_TABLES } from "./schema.js";
import { FLUSH_LOAD, MOVED_KEPT_MS, MOVED_TABLE } from "./sql.js";
import { SUM_LOAD } from "./sum-sql.js";
import { sumShardLoad } from "./summary.js";

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
    const bodies: Record<number, string> = { 2: "764d538b4fe9739c" };
    expect(digest, `the rollup's body changed: bump ROLLUP_VERSION (now ${ROLLUP_VERSION})`).toBe(
      bodies[ROLLUP_VERSION],
    );
  });

  it("the rollup and the reads run with JIT off, on a database that would compile every statement", async () => {
    await db.recreateLoadTables();
    const { rows } = await db.admin.query("SELECT proconfig FROM pg_proc WHERE oid = $1::text::regproc", [
      ROLLUP_FUNCTION_NAME,
    ]);
    expect(rows[0].proconfig).toEqual([JIT_OFF.replaceAll(" ", "")]);

    await window(0);
    await db.admin.query(`ALTER DATABASE "${name}" SET jit_above_cost = 0`);
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: db.url, max: 1 }) });
    try {
      const explain = `EXPLAIN (ANALYZE, FORMAT JSON) ${SUM_LOAD}`;
      const values = [null, 3_600_000, null, 16, null];
      const jit = (result: unknown) => {
        const plan = (result as Record<string, unknown>[])[0]!["QUERY PLAN"];
        return (typeof plan === "string" ? JSON.parse(plan) : plan)[0].JIT;
      };
      // Without the guard, the sum is compiled; with it, not.
      expect(jit(await client.$queryRawUnsafe(explain, ...values))).toBeDefined();
      expect(jit(await queryWithoutJit(client, explain, ...values))).toBeUndefined();
      // The reads send their statements through it: `SET LOCAL jit = off` first, in one transaction.
      const sent: string[] = [];
      const watched = {
        $queryRawUnsafe(sql: string, ...v: unknown[]) {
          sent.push(sql);
          return client.$queryRawUnsafe(sql, ...v);
        },
        $executeRawUnsafe(sql: string, ...v: unknown[]) {
          sent.push(sql);
          return client.$executeRawUnsafe(sql, ...v);
        },
        $transaction: (queries: PromiseLike<unknown>[]) => client.$transaction(queries as never),
      };
      expect((await sumShardLoad(watched, { spanMs: 600_000 })).shards.map((s) => s.calls)).toEqual([5]);
      expect(sent).toEqual([`SET LOCAL ${JIT_OFF}`, SUM_LOAD]);
      // A client whose connections start with JIT off (the CLI's) sends the statement alone.
      const off = new PrismaClient({
        adapter: new PrismaPg({ connectionString: db.url, max: 1, options: JIT_OFF_OPTION }),
      });
      try {
        expect(jit(await off.$queryRawUnsafe(explain, ...values))).toBeUndefined();
        sent.length = 0;
        const marked = markJitOff({
          ...watched,
          $transaction: () => Promise.reject(new Error("no transaction")),
        });
        expect(jit(await queryWithoutJit(marked, explain, ...values))).toBeDefined();
        expect(sent).toEqual([explain]);
      } finally {
        await off.$disconnect();
      }
    } finally {
      await client.$disconnect();
      await db.admin.query(`ALTER DATABASE "${name}" RESET jit_above_cost`);
    }
  });
});
