import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { PartitionMap, ShardLease } from "@shardkit/ownership";
import { MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { findDatabase, openConfig } from "../src/config.js";
import { SLOW, shardkit, testDatabases } from "./cli.js";
import { sql } from "./pg.js";
import { rowsPerShard, seededForMove } from "./seed.js";

// Offline moves on the machine's server (no logical replication needed): a holds 0/0 and 0/1, e is a spare.
const { names, urls } = testDatabases("move", { a: MAIN_PORT, e: MAIN_PORT });
let config = "";
// Only the app's table: the outbox (shardkit's own) is added by the partition map, as the output shows.
const TABLES = ["--table", "Wallet"];
/** `shardkit move 0/1 --config <config> --to <to> --table Wallet`, then `extra`. */
const moveTo = (to: string, ...extra: string[]) =>
  shardkit(["move", "0/1", "--config", config, "--to", to, ...TABLES, ...extra]);

seededForMove("move", urls, { "0/0": 20, "0/1": 30 }, (path) => {
  config = path;
});

function ownershipRows(url: string) {
  return sql(url, `SELECT shard, epoch, state FROM "ShardOwnership" ORDER BY shard`);
}

describe("shardkit move: arguments", () => {
  it("refuses what cannot work before touching a database: exit 2, saying why", async () => {
    const runs = await Promise.all([
      shardkit(["move", "x/y", "--config", config, "--to", names.e, ...TABLES]),
      shardkit(["move", "0/1", "--config", config, "--to", "sk_nowhere", ...TABLES]),
      shardkit(["move", "0/1", "--config", config, "--to", names.e]),
      shardkit(["move", "5/5", "--config", config, "--to", names.e, ...TABLES]),
      shardkit(["move", "0/1", "--config", config, ...TABLES]),
      shardkit(["move", "0/1", "--config", config, "--to", names.e, "--mode", "sideways", ...TABLES]),
      shardkit(["move", "0/1", "--config", config, "--to", names.e, "--table", "Wallet:id:text"]),
      shardkit(["move", "0/1", "--config", config, "--to", names.e, "--max-freeze", "0", ...TABLES]),
      // A URL with a password (one with "/" and "@" in it, as people type them) is echoed without it.
      shardkit([
        "move",
        "0/1",
        "--config",
        config,
        "--to",
        "postgresql://mover:hun/ter@2@127.0.0.1:1/x",
        ...TABLES,
      ]),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(2);
    const [shard, to, tables, unknown, noTo, mode, kind, freeze, secret] = runs.map((r) => r.stderr);
    expect(shard).toMatch(/^shardkit move: shard "x\/y": /);
    expect(to).toContain(
      `no database "sk_nowhere" in the configuration; the configuration has: ${urls.a}, ${urls.e}`,
    );
    expect(tables).toContain("--table: list every table of yours holding shard rows");
    expect(unknown).toContain("shard 5/5 is not in the configuration (it has 0/0, 0/1)");
    expect(noTo).toContain("required option '--to <database>' not specified");
    expect(mode).toContain("argument 'sideways' is invalid. Allowed choices are live, offline.");
    expect(kind).toContain('--table "Wallet:id:text": expected Table, Table:column or Table:column:bits');
    expect(freeze).toContain("--max-freeze must be a positive integer.");
    expect(secret).toContain('no database "postgresql://mover:***@127.0.0.1:1/x" in the configuration');
    expect(secret).not.toMatch(/hun|ter@2/);
    // Nothing was recorded anywhere.
    expect(await ownershipRows(urls.a)).toEqual([]);
  });

  it("--dry-run runs the move's precheck and shows the plan, changing nothing: exit 0 when the move can start", async () => {
    const run = await moveTo(names.e, "--mode", "offline", "--dry-run");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        "dry run: nothing was changed",
        "shard        0/1 (unrecorded)",
        `from         ${urls.a}`,
        `to           ${urls.e}`,
        "mode         offline",
        "tables       Wallet.id, OutboxEvent.id",
        "precheck     ok: the move can start",
        "",
      ].join("\n"),
    );
    expect(await ownershipRows(urls.a)).toEqual([]);
    expect(await ownershipRows(urls.e)).toEqual([]);
    expect(await rowsPerShard(urls.e)).toEqual({});
  });

  it("--dry-run names each problem the precheck finds (wal_level for a live move, a leftover copy at the target): exit 1", async () => {
    const leftover = ShardedUUID.generate(ShardIdentifier.of(0, 1));
    const client = new pg.Client({ connectionString: urls.e });
    await client.connect();
    await client.query(`INSERT INTO "Wallet" (id, owner, balance) VALUES ($1, 'leftover', 0)`, [leftover]);
    try {
      const [text, json] = await Promise.all([
        moveTo(names.e, "--dry-run"),
        moveTo(names.e, "--dry-run", "--json"),
      ]);
      expect(text.code, text.stderr).toBe(1);
      expect(text.stdout).toBe(
        [
          "dry run: nothing was changed",
          "shard        0/1 (unrecorded)",
          `from         ${urls.a}`,
          `to           ${urls.e}`,
          `mode         live (the target's server subscribes with ${urls.a})`,
          "tables       Wallet.id, OutboxEvent.id",
          "precheck     2 problems: the move would not start",
          `  - ${urls.a}: wal_level is replica; a live move needs wal_level = logical (or use mode: 'offline')`,
          `  - ${urls.e}: already holds 1 rows of shard 0/1 (a leftover copy: remove it first)`,
          "",
        ].join("\n"),
      );
      expect(json.code, json.stderr).toBe(1);
      expect(JSON.parse(json.stdout)).toMatchObject({
        ok: false,
        dryRun: true,
        from: urls.a,
        to: urls.e,
        state: "unrecorded",
        issues: [
          expect.stringContaining("wal_level is replica"),
          expect.stringContaining("already holds 1 rows"),
        ],
      });
    } finally {
      await client.query(`DELETE FROM "Wallet" WHERE id = $1`, [leftover]);
      await client.end();
    }
    expect(await ownershipRows(urls.a)).toEqual([]);
    expect(await ownershipRows(urls.e)).toEqual([]);
  });
});

describe("shardkit move: offline", () => {
  it("moves the shard's rows and ownership, with plain progress lines on stderr; status sees it at its new owner", async () => {
    const run = await moveTo(names.e, "--mode", "offline", "--json");
    expect(run.code, run.stderr).toBe(0);
    const steps = run.stderr.trimEnd().split("\n");
    expect(steps[0]).toMatch(/^move 0\/1 \[1\/10\] precheck \([\d.]+ (ms|s)\)$/);
    expect(steps).toContainEqual(expect.stringMatching(/^move 0\/1 \[5\/10\] copy: 33 rows at the target /));
    expect(steps.at(-1)).toMatch(/^move 0\/1 \[10\/10\] done /);
    const result = JSON.parse(run.stdout);
    expect(result).toMatchObject({
      dryRun: false,
      ok: true,
      shard: "0/1",
      from: urls.a,
      to: urls.e,
      epoch: 2,
      mode: "offline",
      rows: { Wallet: 30, OutboxEvent: 3 },
      resumed: null,
    });
    expect(await rowsPerShard(urls.a)).toEqual({ "0/0": 20 });
    expect(await rowsPerShard(urls.e)).toEqual({ "0/1": 30 });

    const status = JSON.parse((await shardkit(["status", "--config", config, "--json", ...SLOW])).stdout);
    expect(status.shards.find((s: { shard: string }) => s.shard === "0/1")).toMatchObject({
      database: urls.e,
      configured: urls.a,
      epoch: 2,
      state: "owned",
    });
    expect(status.databases.find((d: { database: string }) => d.database === urls.e)).toMatchObject({
      shards: ["0/1"],
      pending: 3,
    });
    // Moving it to where it is now is refused.
    const again = await moveTo(names.e, "--dry-run");
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`${urls.e} already owns shard 0/1`);
  });
});

describe("shardkit move: one mover per shard, and a move that stopped half-way", () => {
  it("while another mover holds the lease: refused (exit 1), naming the holder, its step and when its lease lapses; once it has lapsed, --dry-run says it is undone first and the move undoes it and moves", async () => {
    // After the offline move above, 0/1 is at e. A mover takes the lease to move it back to a,
    // fences and copies, and stops there (it dies: its lease is no longer renewed).
    const opened = openConfig({ config });
    try {
      const map = await PartitionMap.open({
        registry: opened.registry,
        tables: [{ table: "Wallet", column: "id" }],
      });
      const lease = await ShardLease.take(map, "0/1", findDatabase(opened, names.a), {
        holder: "ops@terminal",
        leaseMs: 60_000,
      });
      await lease.fence();
      await lease.receive();
      const rows = await sql<{ row: string }>(urls.e, `SELECT row_to_json(w)::text AS row FROM "Wallet" w`);
      await lease.copyIn(async (tx) => {
        for (const { row } of rows)
          await tx.$executeRawUnsafe(
            `INSERT INTO "Wallet" SELECT * FROM json_populate_record(NULL::"Wallet", $1::json)`,
            row,
          );
      });
      map.close();
    } finally {
      await opened.close();
    }
    expect(await rowsPerShard(urls.a)).toEqual({ "0/0": 20, "0/1": 30 }); // the stopped move's copy

    const refused = await moveTo(names.a, "--mode", "offline");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `shardkit move: shard 0/1 is being moved to ${urls.a.replaceAll("/", "\\/")} by ops@terminal \\(step fenced; its lease on ${urls.e.replaceAll("/", "\\/")} lapses in \\d+\\.\\d s unless renewed\\)`,
      ),
    );
    const dry = await moveTo(names.a, "--mode", "offline", "--dry-run");
    expect(dry.code).toBe(1);
    expect(dry.stdout).toMatch(/a move of shard 0\/1 to .* is under way: ops@terminal holds its lease/);

    // Its holder is gone: the lease lapses (made to lapse now, by the database's clock).
    await sql(urls.e, `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() - interval '1 second'`);
    const plan = await moveTo(names.a, "--mode", "offline", "--dry-run");
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain(
      `resume       a move to ${urls.a} by ops@terminal stopped (fenced; its lease lapsed): it is taken over and undone (it had not switched) first\nprecheck     ok: the move can start\n`,
    );
    const run = await moveTo(names.a, "--mode", "offline", "--json");
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      from: urls.e,
      to: urls.a,
      epoch: 3,
      resumed: "rolled-back",
    });
    expect(await rowsPerShard(urls.a)).toEqual({ "0/0": 20, "0/1": 30 });
    expect(await rowsPerShard(urls.e)).toEqual({});
  });
});
