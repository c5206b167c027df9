import { PrismaPg } from "@prisma/adapter-pg";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFile, SCHEMA, SLOW, shardkit } from "./cli.js";
import { LIVE } from "./clusters.js";
import { rowsPerShard, seed } from "./seed.js";

// A live move needs logical replication: two clusters with wal_level = logical (test/clusters.ts).
const { source: SOURCE, target: TARGET } = LIVE;
const names = { a: `sk_cli_live_a_${process.pid}`, e: `sk_cli_live_e_${process.pid}` };
const urls = { a: "", e: "" };
let config = "";

beforeAll(async () => {
  [urls.a, urls.e] = await Promise.all([
    createDatabase(SOURCE.port, names.a),
    createDatabase(TARGET.port, names.e),
  ]);
  await rolloutSchema({
    schema: SCHEMA,
    targets: Object.entries(urls).map(([name, url]) => ({
      name,
      adapter: new PrismaPg({ connectionString: url }),
    })),
    onProgress: () => {},
  });
  await seed(urls.a, { "0/0": 40, "0/1": 60 });
  config = configFile("move-live", {
    shards: [
      { group: 0, member: 0, url: urls.a },
      { group: 0, member: 1, url: urls.a },
    ],
    databases: [{ url: urls.e }],
  });
});

afterAll(async () => {
  await Promise.all([dropDatabase(SOURCE.port, names.a), dropDatabase(TARGET.port, names.e)]);
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
    ]);
    expect(run.code, run.stderr).toBe(0);
    const steps = run.stderr
      .trimEnd()
      .split("\n")
      .map((line) => line.match(/^move 0\/1 \[\d+\/14\] ([a-z-]+)/)?.[1]);
    expect([...new Set(steps)]).toEqual([
      "precheck",
      "receive",
      "publish",
      "subscribe",
      "copy",
      "catch-up",
      "fence",
      "final-position",
      "verify",
      "switch",
      "enforce",
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
});
