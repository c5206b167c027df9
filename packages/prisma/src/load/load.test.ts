import { createHmac } from "node:crypto";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient, withClusterFrozen } from "@shardkit/test-db";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { models } from "../../test/layout.js";
import { TestMetricReader } from "../../test/metrics.js";
import {
  createShardRegistry,
  readShardLoad,
  type ShardLoadWindow,
  shardRouting,
  summarizeLoad,
  sumShardLoad,
} from "../index.js";
import { openShards } from "../open/open.js";
import { rolloutSchema } from "../rollout.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

// Load per logical shard through real routed clients: exact counts per shard, summed across a
// router restart; a database down or frozen at flush time; heavy hitters; expiry; the schema rollout.

const pid = process.pid;
const dbs = [
  { name: `ld_a_${pid}`, port: MAIN_PORT },
  { name: `ld_b_${pid}`, port: MAIN_PORT },
  { name: `ld_c_${pid}`, port: MAIN_PORT },
  { name: `ld_d_${pid}`, port: SECOND.port },
] as const;
const S = {
  a0: ShardIdentifier.of(0, 0),
  a1: ShardIdentifier.of(0, 1),
  b: ShardIdentifier.of(1, 0),
  c: ShardIdentifier.of(1, 1),
  d: ShardIdentifier.of(1, 2),
};
let urls: string[] = [];
let clients: PrismaClient[] = [];
const admin = () => new pg.Client({ connectionString: urls[0]!.replace(dbs[0].name, "postgres") });

const makeRegistry = () =>
  createShardRegistry({
    shards: [
      { shard: S.a0, client: clients[0]! },
      { shard: S.a1, client: clients[0]! },
      { shard: S.b, client: clients[1]! },
      { shard: S.c, client: clients[2]! },
      { shard: S.d, client: clients[3]! },
    ],
    databases: dbs.map((db, i) => ({ client: clients[i]!, name: db.name })),
  });
let registry: ReturnType<typeof makeRegistry>;

beforeAll(async () => {
  urls = await Promise.all(dbs.map((db) => createDatabase(db.port, db.name)));
  await rolloutSchema({
    schema: new URL("../../test/schema.prisma", import.meta.url).pathname,
    targets: dbs.map((db, i) => ({ name: db.name, adapter: new PrismaPg({ connectionString: urls[i]! }) })),
    onProgress: () => {},
  });
  clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) }));
  registry = makeRegistry();
}, patient(120_000));

afterAll(async () => {
  await registry?.disconnect();
  for (const db of dbs) await dropDatabase(db.port, db.name);
}, patient(60_000));

const customer = (shard: ShardIdentifier) => ({
  id: ShardedId.generate("Customer", shard),
  name: "c",
  region: "eu",
});
const router = (load: Parameters<typeof shardRouting>[0]["load"] = {}) =>
  clients[0]!.$extends(shardRouting({ registry, models, load }));

/** Every window of every database, summarized per shard key. */
async function everything(since: Date) {
  const windows: ShardLoadWindow[] = [];
  for (const client of clients) windows.push(...(await readShardLoad(client, { since })));
  return { windows, summary: new Map(summarizeLoad(windows).map((s) => [s.key, s])) };
}
const counts = (s: { calls: number; writes: number; rowsWritten: number } | undefined) =>
  s && { calls: s.calls, writes: s.writes, rowsWritten: s.rowsWritten };
const hashOf = (value: string, salt = "shardkit/load/1") =>
  createHmac("sha256", salt).update(value).digest("hex").slice(0, 16);

describe("load per logical shard", () => {
  it("counts calls, writes and rows written per shard exactly, summed across a router restart; keys hashed unless plainKeys", async () => {
    const since = new Date(Date.now() - 1000);
    const c00a = customer(S.a0);
    const c00b = customer(S.a0);
    const c01 = customer(S.a1);
    const c10 = customer(S.b);

    // The first router: hashed keys (the default).
    const first = router();
    await first.customer.create({ data: c00a });
    await first.customer.create({ data: c00b });
    await first.customer.create({ data: c01 });
    await first.customer.create({ data: c10 });
    for (let i = 0; i < 3; i++) await first.customer.findUnique({ where: { id: c00a.id } });
    await first.customer.update({ where: { id: c01.id }, data: { name: "d" } });
    expect(first.$shardLoad()!.current().get("0/0")).toMatchObject({ calls: 5, writes: 2, rowsWritten: 2 });
    const flushed = await first.$shardLoad()!.flush();
    expect(flushed.map((f) => [f.database, f.status]).sort()).toEqual([
      [dbs[0].name, "written"],
      [dbs[1].name, "written"],
    ]); // only databases with counts get a statement
    expect(first.$shardLoad()!.current().size).toBe(0);

    // The router restarts: another routed client (another router id), with plain keys.
    const second = router({ plainKeys: true });
    expect(second.$shardLoad()!.router).not.toBe(first.$shardLoad()!.router);
    const wallets = [0, 1, 2].map(() => ({
      id: ShardedId.colocatedWith("Wallet", c00a.id),
      customerId: c00a.id,
    }));
    expect((await second.wallet.createMany({ data: wallets })).count).toBe(3);
    expect(
      (await second.wallet.updateMany({ where: { customerId: c00a.id }, data: { label: "x" } })).count,
    ).toBe(3);
    expect(await second.customer.findMany({ where: { id: { in: [c00a.id, c01.id] } } })).toHaveLength(2);
    expect(await second.$scatter().customer.count()).toBe(4); // a leg per database: each shard it holds counts
    await second.$transactionOn(c10.id, async (tx) => {
      await tx.customer.update({ where: { id: c10.id }, data: { name: "t" } });
      await tx.customer.findUnique({ where: { id: c10.id } });
    });
    expect((await second.customer.deleteMany({ where: { id: { in: [c00b.id] } } })).count).toBe(1);
    await second.$shardLoad()!.flush();

    const { windows, summary } = await everything(since);
    expect(counts(summary.get("0/0"))).toEqual({ calls: 10, writes: 5, rowsWritten: 9 });
    expect(counts(summary.get("0/1"))).toEqual({ calls: 4, writes: 2, rowsWritten: 2 });
    expect(counts(summary.get("1/0"))).toEqual({ calls: 4, writes: 2, rowsWritten: 2 });
    // The scatter's leg on 1/1 and 1/2 counted there, nothing else.
    expect(counts(summary.get("1/1"))).toEqual({ calls: 1, writes: 0, rowsWritten: 0 });
    const a0 = summary.get("0/0")!;
    expect(a0.routers.sort()).toEqual([first.$shardLoad()!.router, second.$shardLoad()!.router].sort());
    expect(a0.configs).toHaveLength(1);
    expect(a0.mixedConfigs).toBe(false);
    expect(a0.p50).toBeGreaterThan(0);
    expect(a0.p99!).toBeGreaterThanOrEqual(a0.p50!);
    expect(a0.dbMs).toBeGreaterThan(0);
    // Each window lives on the database holding its shard: b holds only 1/0's.
    expect((await readShardLoad(clients[1]!, { since })).filter((w) => !w.shard.equals(S.b))).toEqual([]);
    // Heavy hitters: the first router's as hashes, the second's as the values themselves.
    const byRouter = (r: string, shard: ShardIdentifier) =>
      windows.filter((w) => w.router === r && w.shard.equals(shard)).flatMap((w) => w.top);
    expect(byRouter(first.$shardLoad()!.router, S.a0)).toEqual([
      { key: hashOf(c00a.id), count: 4, error: 0 },
      { key: hashOf(c00b.id), count: 1, error: 0 },
    ]);
    expect(byRouter(second.$shardLoad()!.router, S.a0)).toEqual([{ key: c00a.id, count: 1, error: 0 }]);
    expect(byRouter(second.$shardLoad()!.router, S.b)).toEqual([{ key: c10.id, count: 2, error: 0 }]);
    expect(JSON.stringify(byRouter(first.$shardLoad()!.router, S.a0))).not.toContain(c00a.id);
  });

  it("a database that refuses connections at flush time fails only its own flush; its counts arrive, all of them, once it is back", async () => {
    const since = new Date(Date.now() - 1000);
    const db = router({ keySalt: "secret" });
    const onA = customer(S.a0);
    const onC = customer(S.c);
    await db.customer.create({ data: onA });
    await db.customer.create({ data: onC });
    await db.customer.findUnique({ where: { id: onC.id } });
    const pgAdmin = admin();
    await pgAdmin.connect();
    try {
      await pgAdmin.query(`ALTER DATABASE "${dbs[2].name}" ALLOW_CONNECTIONS false`);
      await pgAdmin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        dbs[2].name,
      ]);
      const flushing = db.$shardLoad()!.flush();
      // Calls on the other databases go on while the flush to c fails.
      expect((await db.customer.findUnique({ where: { id: onA.id } }))?.id).toBe(onA.id);
      const results = await flushing;
      expect(results.find((r) => r.database === dbs[2].name)?.status).toBe("failed");
      expect(results.find((r) => r.database === dbs[0].name)?.status).toBe("written");
      await db.customer.findUnique({ where: { id: onA.id } }); // the next window
    } finally {
      await pgAdmin.query(`ALTER DATABASE "${dbs[2].name}" ALLOW_CONNECTIONS true`);
      await pgAdmin.end();
    }
    await db.customer.findUnique({ where: { id: onC.id } }); // c's next window, kept apart
    // The batch of the failed flush goes again as it was, then the window since.
    for (let i = 0; i < 2; i++) {
      const again = await db.$shardLoad()!.flush();
      expect(again.find((r) => r.database === dbs[2].name)?.status).toBe("written");
    }
    const { summary } = await everything(since);
    const mine = (key: string) => summary.get(key);
    // 1/1: the create and findUnique kept from the failed flush, plus the findUnique after: nothing lost.
    const onCWindows = (await readShardLoad(clients[2]!, { since })).filter(
      (w) => w.router === db.$shardLoad()!.router,
    );
    expect(onCWindows.map((w) => [w.calls, w.writes, w.rowsWritten])).toEqual([
      [2, 1, 1],
      [1, 0, 0],
    ]);
    const key = hashOf(onC.id, "secret");
    expect(onCWindows.map((w) => w.top)).toEqual([
      [{ key, count: 2, error: 0 }],
      [{ key, count: 1, error: 0 }],
    ]);
    expect(mine("1/1")?.calls).toBeGreaterThanOrEqual(3);
  });

  it("a frozen database: the flush to it ends at its deadline without holding up calls elsewhere; a late commit is not counted twice", async () => {
    const since = new Date(Date.now() - 1000);
    const db = router({ deadlineMs: 1000 });
    const load = db.$shardLoad()!;
    const onA = customer(S.a0);
    const onD = customer(S.d);
    await db.customer.create({ data: onA });
    await db.customer.create({ data: onD });
    await withClusterFrozen(SECOND.cluster, async () => {
      const flushing = load.flush();
      expect((await db.customer.findUnique({ where: { id: onA.id } }))?.id).toBe(onA.id);
      const results = await flushing;
      const d = results.find((r) => r.database === dbs[3].name)!;
      expect(d.status).toBe("failed");
      expect((d.error as { code?: string }).code).toBe("DATABASE_TIMEOUT");
    });
    // The frozen statement commits once thawed: its rows are in, so none is sent again (a copy sent
    // again would be counted twice once a rollup moved the first out of the windows).
    await load.idle();
    expect((await load.flush()).find((r) => r.database === dbs[3].name)).toBeUndefined();
    const onD_ = (await readShardLoad(clients[3]!, { since })).filter((w) => w.router === load.router);
    expect(onD_.reduce((n, w) => n + w.calls, 0)).toBe(1);
  });

  it("a flush deletes windows older than retainMs, of any router", async () => {
    const db = router({ retainMs: 60 * 60 * 1000 });
    await db.customer.findUnique({ where: { id: customer(S.b).id } });
    await db.$shardLoad()!.flush(); // the table exists on b now
    await clients[1]!.$executeRawUnsafe(
      `INSERT INTO shardkit."ShardLoad" (shard, window_start, router_start, window_ms, router, calls, writes, rows_written, db_ms, sketch, top, config)
       VALUES ($1, now() - interval '2 hours', now() - interval '2 hours', 10000, 'old:1:x', 7, 0, 0, 1, '{"alpha":0.02,"min":0.001,"buckets":[]}', '[]', 'x')`,
      S.b.bits,
    );
    const old = new Date(Date.now() - 3 * 60 * 60 * 1000);
    expect((await readShardLoad(clients[1]!, { since: old })).some((w) => w.router === "old:1:x")).toBe(true);
    await db.customer.findUnique({ where: { id: customer(S.b).id } });
    await db.$shardLoad()!.flush();
    expect((await readShardLoad(clients[1]!, { since: old })).some((w) => w.router === "old:1:x")).toBe(
      false,
    );
  });

  it("a router with a short retainMs deletes no window of the last hour, its own or another router's", async () => {
    const db = router({ retainMs: 60_000 });
    await db.customer.findUnique({ where: { id: customer(S.b).id } });
    await db.$shardLoad()!.flush();
    await clients[1]!.$executeRawUnsafe(
      `INSERT INTO shardkit."ShardLoad" (shard, window_start, router_start, window_ms, router, calls, writes, rows_written, db_ms, sketch, top, config)
       VALUES ($1, now() - interval '30 minutes', now() - interval '30 minutes', 10000, 'recent:1:x', 7, 0, 0, 1, '{"alpha":0.02,"min":0.001,"buckets":[]}', '[]', 'x')`,
      S.b.bits,
    );
    await db.customer.findUnique({ where: { id: customer(S.b).id } });
    await db.$shardLoad()!.flush();
    await db.$shardLoad()!.idle(); // its rollup too: the window moves to the rollups, still counted
    const hour = await sumShardLoad(clients[1]!, { spanMs: 3_600_000 });
    expect(hour.shards.find((s) => s.key === S.b.key)?.routers).toContain("recent:1:x");
  });

  it("the table stays out of the schema rollout: the fingerprint still matches and a push leaves it and its rows", async () => {
    const target = () => [{ name: dbs[0].name, adapter: new PrismaPg({ connectionString: urls[0]! }) }];
    const schema = new URL("../../test/schema.prisma", import.meta.url).pathname;
    // What is counted (windows and rollups alike; a router's rollup may move windows meanwhile).
    const counted = async () =>
      (await sumShardLoad(clients[0]!, { spanMs: 3_600_000 })).shards.map((s) => [
        s.key,
        Math.round(s.calls * 1e6),
      ]);
    const before = await counted();
    expect(before.length).toBeGreaterThan(0);
    const checked = await rolloutSchema({
      schema,
      targets: target(),
      skipUnchanged: true,
      onProgress: () => {},
    });
    expect(checked.targets[0]!.fingerprint).toBe("matched");
    const pushed = await rolloutSchema({
      schema,
      targets: target(),
      acceptDataLoss: true,
      onProgress: () => {},
    });
    expect(pushed.ok).toBe(true);
    expect(await counted()).toEqual(before);
  });

  it("load: false counts nothing and has no $shardLoad; bad options are refused", async () => {
    const off = router(false as never);
    expect(off.$shardLoad()).toBeUndefined();
    expect(() => shardRouting({ registry, load: { intervalMs: -1 } })).toThrow(/load.intervalMs/);
    expect(() => shardRouting({ registry, load: { topKeys: 1.5 } })).toThrow(/load.topKeys/);
  });

  it("with a meter provider, the same figures are OpenTelemetry metrics by shard, load on or off", async () => {
    const reader = new TestMetricReader();
    const db = clients[0]!.$extends(
      shardRouting({
        registry,
        models,
        load: false,
        telemetry: { meterProvider: new MeterProvider({ readers: [reader] }) },
      }),
    );
    const c = customer(S.a1);
    await db.customer.create({ data: c });
    await db.customer.findUnique({ where: { id: c.id } });
    await db.customer.deleteMany({ where: { id: c.id } });
    const byShard = async (name: string) =>
      Object.fromEntries((await reader.points(name)).map((p) => [p.attributes["shardkit.shard"], p.value]));
    expect(await byShard("shardkit.shard.writes")).toEqual({ "0/1": 2 });
    expect(await byShard("shardkit.shard.rows_written")).toEqual({ "0/1": 2 });
    expect((await byShard("shardkit.shard.duration"))["0/1"]).toMatchObject({ count: 3 });
    expect((await byShard("shardkit.shard.db_time"))["0/1"]).toBeGreaterThan(0);
  });

  it("openShards' load is the default of its routers, and close() flushes their last window", async () => {
    const since = new Date(Date.now() - 1000);
    const shardsJson = JSON.stringify([{ group: 3, member: 0, url: urls[1]!, pool: 1 }]);
    const schema = new URL("../../test/schema.prisma", import.meta.url).pathname;
    const createClient = (adapter: NonNullable<ConstructorParameters<typeof PrismaClient>[0]["adapter"]>) =>
      new PrismaClient({ adapter });
    const off = await openShards({ schema, createClient, shardsJson, load: false, log: () => {} });
    const offDb = off.registry.databases[0]!.client.$extends(shardRouting({ registry: off.registry }));
    expect(offDb.$shardLoad()).toBeUndefined();
    await off.close();
    const on = await openShards({
      schema,
      createClient,
      shardsJson,
      load: { intervalMs: 3_600_000, plainKeys: true },
      log: () => {},
    });
    const db = on.registry.databases[0]!.client.$extends(shardRouting({ registry: on.registry }));
    const c = customer(ShardIdentifier.of(3, 0));
    await db.customer.create({ data: c });
    const router = db.$shardLoad()!.router;
    await on.close(); // no flush before: the close writes the window
    const windows = (await readShardLoad(clients[1]!, { since })).filter((w) => w.router === router);
    expect(windows.map((w) => [w.shard.key, w.calls, w.writes, w.rowsWritten, w.top])).toEqual([
      ["3/0", 1, 1, 1, [{ key: c.id, count: 1, error: 0 }]],
    ]);
  });

  it("a database no router flushed to reads as no windows", async () => {
    const fresh = `ld_e_${pid}`;
    const url = await createDatabase(MAIN_PORT, fresh);
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 1 }) });
    try {
      expect(await readShardLoad(client)).toEqual([]);
    } finally {
      await client.$disconnect();
      await dropDatabase(MAIN_PORT, fresh);
    }
  });
});
