import { spawn } from "node:child_process";
import { LatencySketch } from "@shardkit/prisma";
import { CREATE_LOAD_TABLE, DROP_LOAD_TABLES, FLUSH_LOAD } from "@shardkit/prisma/internal";
import { MAIN_PORT } from "@shardkit/test-db";
import { beforeAll, describe, expect, it } from "vitest";
import { BIN, configFile, shardkit, testDatabases } from "./cli.js";
import { sql } from "./pg.js";
import { rowsPerShard, seed } from "./seed.js";

// `shardkit balance` and `shardkit drain` on the machine's server, with offline moves (no logical
// replication needed): a holds 0/0, 0/1 and 0/2, b holds 0/3, c is a spare. The load is windows in
// `shardkit."ShardLoad"`, written with the statement routers flush with; a test whose load must not
// reach the next one's plan drops it where it wrote it (`DROP_LOAD_TABLES`: the windows, and the
// rollups any router's flush may have moved them to).
const { names, urls } = testDatabases("balance", { a: MAIN_PORT, b: MAIN_PORT, c: MAIN_PORT });
const TABLES = ["--table", "Wallet"];
const ROWS = { "0/0": 40, "0/1": 30, "0/2": 20, "0/3": 10 } as const;
let config = "";

/**
 * One router's 10 s window on `url`, ending `agoMs` before now (50 s: inside the last minute):
 * `dbMs` of database time per shard, each call taking `latencyMs`.
 */
async function recordLoad(
  url: string,
  dbMs: Record<string, number>,
  options: { config?: string; latencyMs?: number; router?: string; agoMs?: number } = {},
) {
  for (const statement of CREATE_LOAD_TABLE) await sql(url, statement);
  const start = new Date(Date.now() - (options.agoMs ?? 50_000) - 10_000).toISOString();
  const rows = Object.entries(dbMs).map(([key, ms]) => {
    const [group, member] = key.split("/").map(Number) as [number, number];
    const calls = Math.round(ms / (options.latencyMs ?? 2));
    const sketch = new LatencySketch();
    sketch.record(options.latencyMs ?? 2, calls);
    return {
      shard: (group << 6) | member,
      window_start: start,
      window_ms: 10_000,
      router: options.router ?? "test:1:r1",
      calls,
      writes: calls,
      rows_written: calls,
      db_ms: ms,
      sketch: sketch.toJSON(),
      top: [],
      config: options.config ?? "cfg-one",
    };
  });
  await sql(url, FLUSH_LOAD, [JSON.stringify(rows), new Date(Date.now() - 86_400_000).toISOString()]);
}

async function owners(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, url] of Object.entries(urls)) {
    const rows = await sql<{ shard: number; state: string }>(
      url,
      `SELECT shard, state FROM "ShardOwnership"`,
    );
    for (const r of rows) if (r.state === "owned") out[`0/${r.shard & 63}`] = name;
  }
  return out;
}

async function allRows(): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  for (const url of Object.values(urls))
    for (const [k, n] of Object.entries(await rowsPerShard(url))) sum[k] = (sum[k] ?? 0) + n;
  return sum;
}

beforeAll(async () => {
  await seed(urls.a, { "0/0": ROWS["0/0"], "0/1": ROWS["0/1"], "0/2": ROWS["0/2"] });
  await seed(urls.b, { "0/3": ROWS["0/3"] });
  config = configFile("balance", {
    shards: [
      { group: 0, member: 0, url: urls.a },
      { group: 0, member: 1, url: urls.a },
      { group: 0, member: 2, url: urls.a },
      { group: 0, member: 3, url: urls.b },
    ],
    databases: [{ url: urls.c }],
  });
});

describe("shardkit balance", () => {
  it("refuses what cannot work before touching a database: exit 2, saying why", async () => {
    const runs = await Promise.all([
      shardkit(["balance", "--config", config]),
      shardkit(["balance", "--config", config, ...TABLES, "--by", "bytes"]),
      shardkit(["balance", "--config", config, ...TABLES, "--threshold", "-1"]),
      shardkit(["balance", "--config", config, ...TABLES, "--threshold", "11"]),
      shardkit(["drain", "sk_nowhere", "--config", config, ...TABLES]),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(2);
    const [tables, by, negative, high, unknown] = runs.map((r) => r.stderr);
    expect(tables).toContain("--table: list every table of yours holding shard rows");
    expect(by).toContain("argument 'bytes' is invalid. Allowed choices are time, calls, writes.");
    expect(negative).toContain("--threshold must be a number >= 0.");
    expect(high).toMatch(/threshold/);
    expect(unknown).toContain('no database "sk_nowhere" in the configuration');
    expect(await allRows()).toEqual(ROWS);
  });

  it("with no load recorded yet it says so and moves nothing", async () => {
    const run = await shardkit(["balance", "--config", config, ...TABLES, "--json"]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.moves).toEqual([]);
    expect(report.plan.moves).toEqual([]);
    expect(report.reason).toMatch(/no load recorded yet/);
  });

  it("load windows from routers with different configurations: refused, nothing moved", async () => {
    await recordLoad(urls.b, { "0/3": 100 }, { config: "cfg-other", router: "test:2:other" });
    await recordLoad(urls.b, { "0/3": 100 }, { config: "cfg-one", router: "test:3:one" });
    const run = await shardkit(["balance", "--config", config, ...TABLES]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/routers with 2 different shard configurations/);
    expect(await owners()).toEqual({});
    await sql(urls.b, DROP_LOAD_TABLES);
  });

  it("--dry-run shows the plan off the hottest database and changes nothing", async () => {
    // 20, 15 and 10 ms of database time a second on a; 5 on b; none on the spare c.
    await recordLoad(urls.a, { "0/0": 6000, "0/1": 4500, "0/2": 3000 });
    await recordLoad(urls.b, { "0/3": 1500 });
    const run = await shardkit(["balance", "--config", config, ...TABLES, "--dry-run", "--json"]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.problems).toEqual([]);
    const byShard = Object.fromEntries(
      report.shards.map((s: { shard: string; load: number; rows: number }) => [s.shard, [s.load, s.rows]]),
    );
    // Rows: the wallets, and the three outbox events `seed` writes per shard (shardkit's own table).
    expect(byShard).toEqual({ "0/0": [20, 43], "0/1": [15, 33], "0/2": [10, 23], "0/3": [5, 13] });
    expect(report.plan.moves.length).toBeGreaterThan(0);
    // The first move takes load off a (2.7x the mean); later ones may even out the others.
    expect(report.plan.moves[0].from).toBe(urls.a);
    expect(report.plan.before.ratio).toBeCloseTo(2.7, 5);
    expect(report.plan.after.ratio).toBeLessThan(report.plan.before.ratio);
    // The shard that alone is above the mean load stays where it is, reported hot.
    expect(report.plan.hot.map((h: { shard: string }) => h.shard)).toEqual(["0/0"]);
    expect(report.moves).toEqual([]);
    expect(await owners()).toEqual({});
    const text = await shardkit(["balance", "--config", config, ...TABLES, "--dry-run"]);
    expect(text.stdout).toMatch(/^DATABASE\s+SHARDS\s+LOAD \(db ms\/s\)\s+OF MEAN\s+AFTER\s+SIZE$/m);
    expect(text.stdout).toMatch(/^hot: shard 0\/0 /m);
  });

  it("a window a router kept through failed flushes counts for its part inside the window measured", async () => {
    // Started 10 minutes ago and 10 minutes long (flushes failed until now): half of it is in the
    // last 5 minutes, so half of its 6000 ms, over 300 s, adds 10 ms/s to 0/3's 5.
    const sketch = new LatencySketch();
    sketch.record(2, 3000);
    for (const statement of CREATE_LOAD_TABLE) await sql(urls.c, statement);
    await sql(
      urls.c,
      `INSERT INTO shardkit."ShardLoad" (shard, window_start, router_start, window_ms, router, calls, writes, rows_written, db_ms, sketch, top, config)
       VALUES (3, now() - interval '10 minutes', now() - interval '10 minutes', 600000, 'kept:1:x', 3000, 3000, 3000, 6000, $1::jsonb, '[]', 'cfg-one')`,
      [JSON.stringify(sketch.toJSON())],
    );
    const run = await shardkit(["balance", "--config", config, ...TABLES, "--dry-run", "--json"]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const shard = JSON.parse(run.stdout).shards.find((s: { shard: string }) => s.shard === "0/3");
    expect(shard.load).toBeCloseTo(15, 0);
    await sql(urls.c, DROP_LOAD_TABLES);
  });

  it("placement rules: a planned move never goes where the shard's group may not live", async () => {
    // The same databases, c labelled region=us while group 0 must stay in region eu.
    const ruled = configFile("balance-ruled", {
      shards: [
        { group: 0, member: 0, url: urls.a, labels: { region: "eu" } },
        { group: 0, member: 1, url: urls.a },
        { group: 0, member: 2, url: urls.a },
        { group: 0, member: 3, url: urls.b, labels: { region: "eu" } },
      ],
      databases: [{ url: urls.c, labels: { region: "us" } }],
      placement: [{ groups: [0], labels: { region: "eu" } }],
    });
    const run = await shardkit(["balance", "--config", ruled, ...TABLES, "--dry-run", "--json"]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    for (const move of report.plan.moves) expect(move.to).not.toBe(urls.c);
    // Draining b: its shard may go to a, not to c.
    const drain = await shardkit(["drain", names.b, "--config", ruled, ...TABLES, "--dry-run", "--json"]);
    expect(drain.code, drain.stdout + drain.stderr).toBe(0);
    const drained = JSON.parse(drain.stdout);
    expect(drained.plan.moves.length).toBeGreaterThan(0);
    for (const move of drained.plan.moves) expect(move.to).toBe(urls.a);
    // Only a may hold group 0: a drain of a cannot be done, and says so (exit 1), naming what stays.
    const stuck = configFile("balance-stuck", {
      shards: [
        { group: 0, member: 0, url: urls.a, labels: { region: "eu" } },
        { group: 0, member: 1, url: urls.a },
        { group: 0, member: 2, url: urls.a },
        { group: 0, member: 3, url: urls.b },
      ],
      databases: [{ url: urls.c, labels: { region: "us" } }],
      placement: [{ groups: [0], labels: { region: "eu" } }],
    });
    const blocked = await shardkit(["drain", names.a, "--config", stuck, ...TABLES, "--dry-run", "--json"]);
    expect(blocked.code, blocked.stdout + blocked.stderr).toBe(1);
    const refused = JSON.parse(blocked.stdout);
    expect(refused.ok).toBe(false);
    expect(refused.reason).toContain(`the drain is not done: ${urls.a} still holds 0/0, 0/1, 0/2`);
    expect(await owners()).toEqual({});
  });

  it("Ctrl-C stops it after the move under way: that move ends, no other starts, and nothing is lost", async () => {
    const child = spawn(
      process.execPath,
      [BIN, "balance", "--config", config, ...TABLES, "--mode", "offline", "--json"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    let interrupted = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => {
      stderr += d;
      // The first move has started: interrupt, as a person at the terminal would.
      if (!interrupted && /\] move 0\/\d: /.test(stderr)) {
        interrupted = true;
        child.kill("SIGINT");
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(interrupted, stderr).toBe(true);
    expect(code, stdout + stderr).toBe(0);
    expect(stderr).toContain("stopping after the move under way");
    const report = JSON.parse(stdout);
    expect(report.stoppedBy).toBe("interrupted");
    expect(report.plan.moves.length).toBeGreaterThan(1);
    expect(report.moves).toHaveLength(1);
    expect(report.moves[0].status).toBe("moved");
    expect(report.reason).toMatch(/^interrupted after 1 move: run it again to go on$/);
    const placed = await owners();
    expect(placed[report.moves[0].shard]).toBe(
      Object.entries(urls).find(([, u]) => u === report.moves[0].to)![0],
    );
    expect(await allRows()).toEqual(ROWS);
  });

  it("two balance runs at once: the second is refused (exit 1) naming the first and when its lease expires", async () => {
    const before = await owners();
    // Fresh windows, ending now (a pause reads the last minute, however long the run takes to
    // start), each shard's p99 2 ms.
    await recordLoad(
      urls.a,
      { "0/0": 3000, "0/1": 3000, "0/2": 3000, "0/3": 3000 },
      { router: "test:4:now", agoMs: 0 },
    );
    // The first run takes the fleet's lease, then waits before its first move: the other shards'
    // p99 is above --max-p99 1. Meanwhile a second run starts.
    const first = spawn(
      process.execPath,
      [BIN, "balance", "--config", config, ...TABLES, "--mode", "offline", "--max-p99", "1", "--json"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    first.stdout.on("data", (d) => (stdout += d));
    const closed = new Promise<number | null>((resolve) => first.on("close", resolve));
    try {
      // Paused (or ended: then the expectations below say why).
      await Promise.race([
        closed,
        new Promise<void>((resolve) =>
          first.stderr.on("data", (d) => {
            stderr += d;
            if (/\] paused /.test(stderr)) resolve();
          }),
        ),
      ]);
      const second = await shardkit(["balance", "--config", config, ...TABLES, "--mode", "offline"]);
      first.kill("SIGINT");
      expect(await closed, stdout + stderr).toBe(0);
      expect(second.code, second.stdout + second.stderr).toBe(1);
      expect(second.stderr).toMatch(
        new RegExp(
          `another run holds the fleet's balance lease: balance by host \\S+, pid ${first.pid}, run [0-9a-f]{8} \\(on ${urls.a}\\); it expires at \\S+ \\(in \\d+\\.\\d s\\) unless renewed`,
        ),
      );
    } finally {
      first.kill("SIGKILL");
    }
    // The first one stopped before its first move, as asked; nothing moved.
    const report = JSON.parse(stdout);
    expect(report.stoppedBy).toBe("interrupted");
    expect(report.moves).toEqual([]);
    expect(await owners()).toEqual(before);
  });

  it("runs the plan one move at a time; every row is where its shard is; a second run finds nothing to do", async () => {
    const run = await shardkit(["balance", "--config", config, ...TABLES, "--mode", "offline", "--json"], {
      timeoutMs: 120_000,
    });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.moves.length).toBeGreaterThan(0);
    for (const move of report.moves) expect(move.status).toBe("moved");
    expect(run.stderr).toMatch(/^balance \[1\/\d+\] moved 0\/\d /m);
    const placed = await owners();
    // Each shard's rows are all on its owner, none lost, none doubled.
    expect(await allRows()).toEqual(ROWS);
    for (const [shard, name] of Object.entries(placed))
      expect((await rowsPerShard(urls[name as "a" | "b" | "c"]))[shard]).toBe(
        ROWS[shard as keyof typeof ROWS],
      );
    expect(placed["0/0"]).toBe("a");
    expect(Object.values(placed)).toContain("c");
    // The load is per shard, not per database: measured again after the moves, nothing to do.
    const again = await shardkit(["balance", "--config", config, ...TABLES, "--dry-run", "--json"]);
    const second = JSON.parse(again.stdout);
    expect(second.plan.moves).toEqual([]);
    expect(second.plan.before.ratio).toBeCloseTo(report.plan.after.ratio, 5);
  });

  it("drain moves every shard off a database; every row is where its shard is", async () => {
    const run = await shardkit(
      ["drain", names.c, "--config", config, ...TABLES, "--mode", "offline", "--json"],
      {
        timeoutMs: 120_000,
      },
    );
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.drain).toBe(urls.c);
    expect(report.moves.every((m: { kind: string }) => m.kind === "drain")).toBe(true);
    const placed = await owners();
    expect(Object.values(placed)).not.toContain("c");
    expect(Object.keys(placed).sort()).toEqual(["0/0", "0/1", "0/2", "0/3"]);
    expect(await allRows()).toEqual(ROWS);
  });

  it("drain plans no balancing move; stopped early it exits 1 naming what is left, and 0 once the database is empty", async () => {
    // The database holding the most shards now (after the moves above): two or more of the four.
    const placed = await owners();
    const counts = Object.values(placed).reduce<Record<string, number>>(
      (n, db) => Object.assign(n, { [db]: (n[db] ?? 0) + 1 }),
      {},
    );
    const [fullest] = Object.entries(counts).sort((x, y) => y[1] - x[1])[0]!;
    const holds = Object.keys(placed).filter((shard) => placed[shard] === fullest);
    expect(holds.length).toBeGreaterThan(1);
    const name = names[fullest as "a" | "b" | "c"];
    const url = urls[fullest as "a" | "b" | "c"];
    const drain = (extra: string[]) =>
      shardkit(["drain", name, "--config", config, ...TABLES, "--mode", "offline", "--json", ...extra], {
        timeoutMs: 120_000,
      });

    const first = await drain(["--max-moves", "1"]);
    expect(first.code, first.stdout + first.stderr).toBe(1);
    const stopped = JSON.parse(first.stdout);
    expect(stopped.ok).toBe(false);
    expect(stopped.moves).toHaveLength(1);
    expect(stopped.moves[0]).toMatchObject({ status: "moved", from: url, kind: "drain" });
    // No balancing move, although the databases that stay are out of balance.
    for (const move of stopped.plan.moves) expect(move).toMatchObject({ kind: "drain", from: url });
    const left = holds.filter((shard) => shard !== stopped.moves[0].shard);
    expect(stopped.reason).toContain(`the drain is not done: ${url} still holds ${left.join(", ")}`);

    const second = await drain([]);
    expect(second.code, second.stdout + second.stderr).toBe(0);
    const done = JSON.parse(second.stdout);
    expect(done.ok).toBe(true);
    expect(done.plan.stoppedBy).toBe("drained");
    expect(done.moves.map((m: { shard: string }) => m.shard).sort()).toEqual(left);
    for (const move of done.moves) expect(move).toMatchObject({ status: "moved", kind: "drain" });
    expect(Object.values(await owners())).not.toContain(fullest);
    expect(await allRows()).toEqual(ROWS);

    // Empty already: nothing to move, exit 0.
    const again = await drain([]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).moves).toEqual([]);
  });
});
