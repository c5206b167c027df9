import { CREATE_LOAD_TABLE, FLUSH_LOAD } from "@shardkit/prisma/internal";
import { MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { configFile, SLOW, shardkit, testDatabases } from "./cli.js";

// Three databases with one schema; the machine's server runs with wal_level = replica.
const { urls } = testDatabases("doctor", { a: MAIN_PORT, b: MAIN_PORT, c: MAIN_PORT });

const three = () => [
  { group: 0, member: 0, url: urls.a, pool: 5 },
  { group: 0, member: 1, url: urls.b, pool: 5 },
  { group: 0, member: 2, url: urls.c, pool: 5 },
];

describe("shardkit doctor", () => {
  it("a healthy configuration: every check passes but wal_level, a warning (live moves need logical); exit 0, 1 with --strict", async () => {
    const config = configFile("doctor-ok", three());
    const [run, strict] = await Promise.all([
      shardkit(["doctor", "--config", config, ...SLOW]),
      shardkit(["doctor", "--config", config, "--strict", "--json", ...SLOW]),
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^reachable\s+ok\s+3 of 3 databases answer$/m);
    expect(run.stdout).toMatch(/^distinct\s+ok\s/m);
    expect(run.stdout).toMatch(/^budget\s+ok\s+15 of \d+ connections on server /m);
    expect(run.stdout).toMatch(/^wal_level\s+warning\s+3 of 3 databases not logical$/m);
    expect(run.stdout).toMatch(/^drift\s+ok\s+3 databases, one schema$/m);
    expect(run.stdout).toMatch(
      /^atomic\s+ok\s+not enabled: max_prepared_transactions = 0 \(the default\) on 3 databases; sagas need nothing$/m,
    );
    expect(run.stdout).toContain(`warning: wal_level: wal_level is not logical on ${urls.a} (replica)`);
    expect(run.stdout).toMatch(/no problems found\n$/);
    expect(strict.code).toBe(1);
    const report = JSON.parse(strict.stdout);
    expect(report).toMatchObject({ ok: false, strict: true, drift: { differences: [] } });
    expect(report.walLevels).toEqual(
      Object.values(urls).map((database) => ({ database, walLevel: "replica" })),
    );
  });

  it("names a router whose clock is off its database's, from its load windows: a warning", async () => {
    // A window as a router an hour ahead flushes it: its clock's time of the flush beside it.
    const ahead = Date.now() + 3_600_000;
    const client = new pg.Client({ connectionString: urls.b });
    await client.connect();
    try {
      for (const statement of CREATE_LOAD_TABLE) await client.query(statement);
      const row = {
        shard: 1,
        window_start: new Date(ahead - 10_000).toISOString(),
        window_ms: 10_000,
        router: "app-7:42:ahead",
        calls: 5,
        writes: 0,
        rows_written: 0,
        db_ms: 5,
        sketch: { alpha: 0.02, min: 0.001, buckets: [] },
        top: [],
        config: "c",
        sent_at: new Date(ahead).toISOString(),
      };
      await client.query(FLUSH_LOAD, [JSON.stringify([row]), new Date(0).toISOString()]);
    } finally {
      await client.end();
    }
    const run = await shardkit(["doctor", "--config", configFile("doctor-clock", three()), ...SLOW]);
    // The window goes, so the other tests' databases hold no skewed router.
    const cleanup = new pg.Client({ connectionString: urls.b });
    await cleanup.connect();
    await cleanup.query(`DELETE FROM shardkit."ShardLoad" WHERE router = 'app-7:42:ahead'`);
    await cleanup.end();
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^clocks\s+warning\s+1 of 1 router with a clock off by more than 2 s$/m);
    expect(run.stdout).toContain(
      "warning: clocks: router app-7:42:ahead's clock is 1 h 0 min ahead of its database's",
    );
  });

  it("databases behind a pooler (`pooler: true`) are left out of the server's budget: 100 instances pass where the same pools direct fail", async () => {
    const pooled = configFile(
      "doctor-pooler",
      three().map((e) => ({ ...e, pool: 10, pooler: e.member !== 2 })),
    );
    const run = await shardkit(["doctor", "--config", pooled, "--instances", "100", ...SLOW]);
    expect(run.stdout).toMatch(
      /^budget\s+FAIL\s+1000 of \d+ connections on server \S+; 2 databases behind a pooler \(pooler: true\), not counted on the server$/m,
    );
    const all = configFile(
      "doctor-pooler-all",
      three().map((e) => ({ ...e, pool: 10, pooler: true })),
    );
    const ok = await shardkit(["doctor", "--config", all, "--instances", "100", ...SLOW]);
    expect(ok.stdout).toMatch(
      /^budget\s+ok\s+3 databases behind a pooler \(pooler: true\), not counted on the server$/m,
    );
  });

  it("finds a database listed twice, pools over the server's budget and schema drift; exit 1", async () => {
    const client = new pg.Client({ connectionString: urls.c });
    await client.connect();
    await client.query(`ALTER TABLE "Wallet" ADD COLUMN note text`);
    await client.query(`ALTER TABLE "Wallet" ALTER COLUMN balance TYPE bigint`);
    await client.query(`DROP TABLE "ShardMove"`);
    await client.end();
    // Shard 0/3 names database a again, spelled another way.
    const twice = urls.a.replace("postgresql://", "postgres://").replace("127.0.0.1", "localhost");
    const config = configFile("doctor-bad", [...three(), { group: 0, member: 3, url: twice, pool: 5 }]);
    const [run, json] = await Promise.all([
      shardkit(["doctor", "--config", config, "--instances", "10", ...SLOW]),
      shardkit(["doctor", "--config", config, "--instances", "10", "--json", ...SLOW]),
    ]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^distinct\s+FAIL\s+1 database listed twice/m);
    expect(run.stdout).toContain(
      `error: distinct: ${twice} (shards 0/3) is the same database as ${urls.a} (shards 0/0)`,
    );
    expect(run.stdout).toMatch(/^budget\s+FAIL\s+200 of \d+ connections/m);
    expect(run.stdout).toMatch(
      /error: budget: server \S+: pools of 20 x 10 instances = 200 connections exceed max_connections/,
    );
    expect(run.stdout).toMatch(/^drift\s+FAIL\s+1 of 4 databases differ from the others$/m);
    expect(run.stdout).toContain(
      `error: drift: ${urls.c} differs from the schema of 3 databases (${urls.a}, ...): missing table ShardMove; extra column Wallet.note; changed column Wallet.balance: bigint not null default 0 <> integer not null default 0`,
    );
    expect(run.stdout).toMatch(/3 problems found\n$/);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report.drift).toEqual({
      reference: [urls.a, urls.b, twice],
      differences: [
        {
          database: urls.c,
          missing: ["table ShardMove"],
          extra: ["column Wallet.note"],
          changed: ["column Wallet.balance: bigint not null default 0 <> integer not null default 0"],
        },
      ],
    });
    expect(report.findings.map((f: { check: string }) => f.check).sort()).toEqual([
      "budget",
      "distinct",
      "drift",
      "wal_level",
    ]);
  });
});
