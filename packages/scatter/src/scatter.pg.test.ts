// Real PostgreSQL shards: three databases on 127.0.0.1:5432 and one on a second server
// of the file's own (test-db's `ownCluster`, on a port of its own) that one test stops. A reference database holds every row,
// so merged results are checked against what PostgreSQL itself answers over the union.
import { randomBytes } from "node:crypto";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mergeAggregates, mergeGroupBy, planAggregate } from "./aggregate.js";
import { keysetSql } from "./cursor.js";
import { ScatterError } from "./errors.js";
import { mergePage, type PagePlan, planPage } from "./paginate.js";
import { scatter } from "./scatter.js";
import { compareBy } from "./sort.js";
import { dropShardb, startShardb, withShardbStopped } from "./testing/pg-cluster.js";

interface Shard {
  name: string;
  port: number;
  database: string;
  pool: pg.Pool;
}
interface Item {
  id: string;
  score: number | null;
  name: string | null;
  created_at: Date;
  amount: bigint;
  currency: string;
}

const run = randomBytes(4).toString("hex");
const dbName = (n: number | string) => `sk_scatter_${run}_${n}`;
const BIGINT = 20;
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === BIGINT ? (v: string) => BigInt(v) : pg.types.getTypeParser(oid, format)) as never,
};
const newPool = (port: number, database: string) => {
  const pool = new pg.Pool({
    host: "127.0.0.1",
    port,
    user: "postgres",
    database,
    max: 6,
    connectionTimeoutMillis: 5000,
    types,
  });
  pool.on("error", () => {}); // idle connections die when the shardb server is stopped
  return pool;
};

const shards: Shard[] = [];
let reference: pg.Pool;
let monitor: pg.Pool;
let seed = 42;
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
};
const NAMES = ["alpha", "Beta", "beta", "gamma", "é", "z", "\u{1F600}", "\uffff"];
const CURRENCIES = ["EUR", "USD", "GBP"];
let nextId = 0;
function makeItem(): Item {
  const id = `item-${String(nextId++).padStart(5, "0")}`;
  return {
    id,
    score: random() < 0.2 ? null : Math.floor(random() * 10),
    name: random() < 0.2 ? null : (NAMES[Math.floor(random() * NAMES.length)] as string),
    created_at: new Date(Date.UTC(2026, 0, 1) + Math.floor(random() * 1e9)),
    amount: BigInt(Math.floor(random() * 1e6)) * 10n ** 9n,
    currency: CURRENCIES[Math.floor(random() * CURRENCIES.length)] as string,
  };
}

const DDL = `CREATE TABLE item (
  id text COLLATE "C" PRIMARY KEY, score int, name text COLLATE "C",
  created_at timestamptz(3) NOT NULL, amount bigint NOT NULL, currency text COLLATE "C" NOT NULL)`;

async function insert(pool: pg.Pool, items: Item[]): Promise<void> {
  for (const it of items)
    await pool.query("INSERT INTO item VALUES ($1, $2, $3, $4, $5, $6)", [
      it.id,
      it.score,
      it.name,
      it.created_at,
      it.amount,
      it.currency,
    ]);
}

async function adminQuery(port: number, sql: string): Promise<void> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "postgres" });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * The recommended pattern: run a query that stops when `signal` aborts. `client.query` cannot be
 * aborted, so on abort the backend is cancelled with pg_cancel_backend from another connection,
 * and the aborted connection is destroyed rather than returned to the pool.
 */
async function query<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  text: string,
  values: unknown[],
  signal: AbortSignal,
): Promise<R[]> {
  signal.throwIfAborted();
  const client = await pool.connect();
  // A connection the server drops between checkout and query (a server stopping) emits 'error'
  // with no listener once the pool has handed it out: keep the test process alive; the query fails.
  const dropped = () => {};
  client.on("error", dropped);
  const pid = (client as unknown as { processID: number }).processID;
  const cancel = () => {
    pool.query("SELECT pg_cancel_backend($1)", [pid]).catch(() => {});
  };
  signal.addEventListener("abort", cancel, { once: true });
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    signal.removeEventListener("abort", cancel);
    client.off("error", dropped);
    client.release(signal.aborted);
  }
}

const orderSql = (plan: PagePlan) =>
  plan.orderBy
    .map((k) => `"${k.field}" ${k.direction.toUpperCase()} NULLS ${k.nulls.toUpperCase()}`)
    .join(", ");

/** What one shard runs for a page plan. */
function fetchPage(shard: Shard, plan: PagePlan, signal: AbortSignal): Promise<Item[]> {
  const where = plan.after ? keysetSql(plan.after) : { text: "TRUE", values: [] };
  return query<Item>(
    shard.pool,
    `SELECT * FROM item WHERE ${where.text} ORDER BY ${orderSql(plan)} LIMIT ${plan.take}`,
    where.values,
    signal,
  );
}

const activeWith = async (tag: string) =>
  (
    await monitor.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()",
      [tag],
    )
  ).rows;

/** The port of the second server (the file's own: `startShardb`). */
let shardbPort = 0;

beforeAll(async () => {
  shardbPort = await startShardb();
  const ports = [5432, 5432, 5432, shardbPort];
  for (const [n, port] of [...ports.entries(), ["all", 5432] as const]) {
    await adminQuery(port, `CREATE DATABASE ${dbName(n)}`);
    const pool = newPool(port, dbName(n));
    await pool.query(DDL);
    if (n === "all") reference = pool;
    else shards.push({ name: `pg${port}-${n}`, port, database: dbName(n), pool });
  }
  const items = Array.from({ length: 200 }, makeItem);
  await insert(reference, items);
  for (const [s, shard] of shards.entries())
    await insert(
      shard.pool,
      items.filter((_, i) => i % shards.length === s),
    );
  monitor = newPool(5432, "postgres");
});

afterAll(async () => {
  for (const s of shards) await s.pool.end().catch(() => {});
  await reference?.end().catch(() => {});
  await monitor?.end().catch(() => {});
  for (const n of [0, 1, 2, "all"] as const)
    await adminQuery(5432, `DROP DATABASE IF EXISTS ${dbName(n)} WITH (FORCE)`).catch(() => {});
  await dropShardb(); // and shard 3's database with it
});

describe("scatter over real PostgreSQL shards", () => {
  const key = (s: Shard) => s.name;

  it("keyset pages across 4 servers' shards match PostgreSQL's own order, with rows inserted between pages", async () => {
    const request = {
      orderBy: [{ score: "desc" as const }, { name: "asc" as const }],
      tiebreaker: "id",
      limit: 9,
    };
    const plan0 = planPage(request);
    const mustSee = new Set(
      (await reference.query<{ id: string }>("SELECT id FROM item")).rows.map((r) => r.id),
    );
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 100; page++) {
      const plan = planPage({ ...request, cursor });
      const result = await scatter(shards, (s, signal) => fetchPage(s, plan, signal), { key });
      for (const o of result.outcomes)
        expect(o.status === "fulfilled" && (o.rows ?? 0) <= plan.take).toBe(true);
      const { rows, nextCursor } = mergePage(plan, result.values);
      seen.push(...rows.map((r) => r.id));
      cursor = nextCursor;
      if (cursor === null) break;
      // Two new rows land on some shard between pages; those after the cursor must show up later.
      const last = rows[rows.length - 1] as Item;
      for (let j = 0; j < 2; j++) {
        const item = makeItem();
        await insert((shards[(page + j) % shards.length] as Shard).pool, [item]);
        await insert(reference, [item]);
        if (compareBy<Item>(plan0.orderBy)(item, last) > 0) mustSee.add(item.id);
      }
    }
    const all = (await reference.query<{ id: string }>(`SELECT id FROM item ORDER BY ${orderSql(plan0)}`))
      .rows;
    expect(seen).toEqual(all.map((r) => r.id).filter((id) => mustSee.has(id)));
  });

  it("an offset page fetches offset + limit rows per shard and equals OFFSET/LIMIT on the union", async () => {
    const plan = planPage({ orderBy: { created_at: "desc" }, tiebreaker: "id", offset: 30, limit: 10 });
    const result = await scatter(shards, (s, signal) => fetchPage(s, plan, signal), { key });
    expect(result.outcomes.map((o) => (o.status === "fulfilled" ? o.rows : -1))).toEqual([40, 40, 40, 40]);
    const expected = await reference.query<Item>(
      `SELECT * FROM item ORDER BY ${orderSql(plan)} OFFSET 30 LIMIT 10`,
    );
    expect(mergePage(plan, result.values).rows).toEqual(expected.rows);
  });

  it("count, sum, avg, min, max and groupBy merged across shards equal the reference database's", async () => {
    const request = {
      _count: { _all: true, score: true },
      _sum: { amount: true },
      _avg: { score: true, amount: true },
      _min: { created_at: true, name: true },
      _max: { score: true, name: true },
    } as const;
    const plan = planAggregate(request);
    expect(plan).toEqual({
      _count: { _all: true, score: true, amount: true },
      _sum: { amount: true, score: true },
      _min: { created_at: true, name: true },
      _max: { score: true, name: true },
    });
    const select = `count(*)::int AS c_all, count(score)::int AS c_score, count(amount)::int AS c_amount,
      sum(amount)::bigint AS s_amount, sum(score)::int AS s_score, min(created_at) AS min_at,
      min(name) AS min_name, max(score) AS max_score, max(name) AS max_name`;
    type Agg = Record<string, any>;
    const toPartial = (r: Agg) => ({
      _count: { _all: r.c_all, score: r.c_score, amount: r.c_amount },
      _sum: { amount: r.s_amount, score: r.s_score },
      _min: { created_at: r.min_at, name: r.min_name },
      _max: { score: r.max_score, name: r.max_name },
    });
    const whole = await scatter(shards, (s, signal) =>
      query<Agg>(s.pool, `SELECT ${select} FROM item`, [], signal),
    );
    const merged = mergeAggregates(
      whole.values.map((rows) => toPartial(rows[0] as Agg)),
      request,
    );
    const [ref] = (
      await reference.query(
        `SELECT ${select}, avg(score)::float8 AS avg_score, avg(amount)::float8 AS avg_amount FROM item`,
      )
    ).rows;
    expect(merged).toEqual({
      _count: { _all: ref.c_all, score: ref.c_score },
      _sum: { amount: ref.s_amount },
      _avg: { score: expect.closeTo(ref.avg_score, 12), amount: expect.closeTo(ref.avg_amount, 3) },
      _min: { created_at: ref.min_at, name: ref.min_name },
      _max: { score: ref.max_score, name: ref.max_name },
    });
    expect(typeof merged._sum?.amount).toBe("bigint");

    const grouped = await scatter(shards, (s, signal) =>
      query<Agg>(s.pool, `SELECT currency, ${select} FROM item GROUP BY currency`, [], signal),
    );
    const groups = mergeGroupBy(
      grouped.values.map((rows) => rows.map((r) => ({ currency: r.currency, ...toPartial(r) }))),
      ["currency"],
      { _count: true, _sum: { amount: true }, _max: { name: true } },
    );
    const refGroups = await reference.query(
      `SELECT currency, count(*)::int AS n, sum(amount)::bigint AS total, max(name) AS top FROM item GROUP BY currency ORDER BY currency`,
    );
    expect(groups).toEqual(
      refGroups.rows.map((r) => ({
        currency: r.currency,
        _count: r.n,
        _sum: { amount: r.total },
        _max: { name: r.top },
      })),
    );
  });

  it("with the second server stopped, 'fail' names its shard and 'partial' reports it missing", async () => {
    const count = (s: Shard, signal: AbortSignal) =>
      query(s.pool, "SELECT count(*)::int AS n FROM item", [], signal);
    await withShardbStopped(async () => {
      let err: unknown;
      try {
        await scatter(shards, count, { key, deadlineMs: 20_000 });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ScatterError);
      const failure = err as ScatterError;
      expect(failure.code).toBe("TARGETS_FAILED");
      expect(failure.message).toMatch(new RegExp(`^1 of 4 targets missing: "pg${shardbPort}-3" \\(error: `));
      expect(failure.missing.map((m) => [m.key, m.reason])).toEqual([[`pg${shardbPort}-3`, "error"]]);

      const partial = await scatter(shards, count, { key, policy: "partial", deadlineMs: 20_000 });
      expect(partial.complete).toBe(false);
      expect(partial.values).toHaveLength(3);
      expect(partial.missing.map((m) => [m.key, m.reason])).toEqual([[`pg${shardbPort}-3`, "error"]]);
      // refused, shut down, reset, or (an idle pooled connection the stop dropped) terminated
      const lost = partial.missing[0]?.error as { code?: string; message?: string } | undefined;
      expect(`${lost?.code} ${lost?.message}`).toMatch(
        /ECONNREFUSED|57P01|57P03|ECONNRESET|Connection terminated/,
      );
    });
    const healed = await scatter(shards, count, { key });
    expect(healed.complete).toBe(true);
  });

  it("the caller's abort cancels the slow queries on the database side (pg_sleep is gone)", async () => {
    const tag = `sk_cancel_${randomBytes(4).toString("hex")}`;
    const controller = new AbortController();
    const calls: Promise<unknown>[] = [];
    const run = scatter(
      shards.slice(0, 2),
      (s, signal) => {
        const call = query(s.pool, `SELECT pg_sleep(30) /* ${tag} */`, [], signal);
        calls.push(call);
        return call;
      },
      { key, signal: controller.signal },
    );
    run.catch(() => {});
    await eventually("both pg_sleep queries to run", async () => {
      const rows = await activeWith(tag);
      return rows.length === 2;
    });
    controller.abort();
    await expect(run).rejects.toMatchObject({ code: "ABORTED" });
    await eventually("the pg_sleep queries to be cancelled", async () => {
      const rows = await activeWith(tag);
      return rows.length === 0;
    });
    for (const call of calls) await expect(call).rejects.toMatchObject({ code: "57014" }); // query_canceled
  });

  it("a deadline cancels the slow shard's query and 'partial' returns the fast shards", async () => {
    const tag = `sk_deadline_${randomBytes(4).toString("hex")}`;
    const calls: Promise<unknown>[] = [];
    const result = await scatter(
      shards.slice(0, 3),
      (s, signal) => {
        const sql = s === shards[1] ? `SELECT pg_sleep(30) /* ${tag} */` : "SELECT 1 AS one";
        const call = query(s.pool, sql, [], signal);
        calls.push(call);
        return call;
      },
      { key, policy: "partial", deadlineMs: 1500 },
    );
    expect(result.values).toEqual([[{ one: 1 }], [{ one: 1 }]]);
    expect(result.missing.map((m) => [m.key, m.reason])).toEqual([["pg5432-1", "deadline"]]);
    await eventually("the pg_sleep query to be cancelled", async () => {
      const rows = await activeWith(tag);
      return rows.length === 0;
    });
    await expect(calls[1]).rejects.toMatchObject({ code: "57014" });
  });
});
