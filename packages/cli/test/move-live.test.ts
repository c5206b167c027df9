import { patient } from "@shardkit/test-db";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { SLOW, shardkit, testDatabases } from "./cli.js";
import { LIVE } from "./clusters.js";
import { rowsPerShard, seededForMove } from "./seed.js";

// A live move needs logical replication: two clusters with wal_level = logical (test/clusters.ts).
const { source: SOURCE, target: TARGET } = LIVE;
const { urls } = testDatabases("live", { a: SOURCE.port, e: TARGET.port });
let config = "";

seededForMove("move-live", urls, { "0/0": 40, "0/1": 60 }, (path) => {
  config = path;
});

describe("shardkit move: live", () => {
  it("doctor finds wal_level logical; the shard streams to another server, with a progress line per step", async () => {
    const doctor = await shardkit(["doctor", "--config", config, "--strict", ...SLOW]);
    expect(doctor.code, doctor.stdout).toBe(0);
    expect(doctor.stdout).toMatch(/^wal_level\s+ok\s+logical on 2 databases$/m);

    const run = await shardkit([
      "move",
      "0/1",
      "--config",
      config,
      "--to",
      urls.e,
      "--table",
      "Wallet",
      "--table",
      "OutboxEvent",
      "--max-freeze",
      String(patient(20_000)),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const steps = run.stderr
      .trimEnd()
      .split("\n")
      .map((line) => line.match(/^move 0\/1 \[\d+\/15\] ([a-z-]+)/)?.[1]);
    expect([...new Set(steps)]).toEqual([
      "precheck",
      "lease",
      "receive",
      "publish",
      "subscribe",
      "copy",
      "catch-up",
      "verify",
      "fence",
      "final-position",
      "verify-changes",
      "switch",
      "teardown",
      "cleanup",
      "done",
    ]);
    expect(run.stdout).toMatch(
      new RegExp(`^moved shard 0/1: ${urls.a} -> ${urls.e}, epoch 2 \\(live\\)$`, "m"),
    );
    expect(run.stdout).toMatch(/^writes held [\d.]+ (ms|s) \(fence to switch\)/m);
    expect(run.stdout).toMatch(/^Wallet\s+60$/m);
    expect(await rowsPerShard(urls.a)).toEqual({ "0/0": 40 });
    expect(await rowsPerShard(urls.e)).toEqual({ "0/1": 60 });
    expect(await rowsPerShard(urls.e, "OutboxEvent")).toEqual({ "0/1": 3 });
  });

  it("a replication slot of a move that no move holds (its mover died before anyone took over) is reported by status and doctor with the WAL it holds; exit 1", async () => {
    const client = new pg.Client({ connectionString: urls.a });
    await client.connect();
    await client.query(
      `SELECT pg_create_logical_replication_slot('shardkit_move_1_0123456789ab', 'pgoutput')`,
    );
    try {
      const status = await shardkit(["status", "--config", config, ...SLOW]);
      expect(status.code).toBe(1);
      expect(status.stdout).toMatch(
        new RegExp(
          `1 replication object that no move holds .*\n  ${urls.a.replaceAll("/", "\\/")}: slot shardkit_move_1_0123456789ab \\(shard 0/1\\), holding [\\d.]+ [KMG]?i?B of WAL`,
        ),
      );
      const doctor = await shardkit(["doctor", "--config", config, ...SLOW]);
      expect(doctor.code).toBe(1);
      expect(doctor.stdout).toMatch(/^moves\s+FAIL\s+0 stopped moves, 1 replication object no move holds$/m);
      expect(doctor.stdout).toContain(
        `error: moves: ${urls.a}: slot shardkit_move_1_0123456789ab belongs to no move under way`,
      );
    } finally {
      await client.query(`SELECT pg_drop_replication_slot('shardkit_move_1_0123456789ab')`);
      await client.end();
    }
  });
});
