import { execFileSync } from "node:child_process";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, configFile, SCHEMA, shardkit } from "./cli.js";
import { sql, withClient } from "./pg.js";

// Two shard databases and a spare: the rollout reaches all three, in the configuration's order.
const names = ["a", "b", "spare"].map((k) => `sk_cli_rollout_${k}_${process.pid}`);
let urls: string[] = [];
let config = "";

beforeAll(async () => {
  urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
  config = configFile("rollout", {
    shards: [
      { group: 0, member: 0, url: urls[0] },
      { group: 0, member: 1, url: urls[1] },
    ],
    databases: [{ url: urls[2] }],
  });
});

afterAll(async () => {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
});

async function tables(url: string): Promise<string[]> {
  const rows = await sql<{ table_name: string }>(
    url,
    `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
  );
  return rows.map((r) => r.table_name);
}

describe("shardkit rollout", () => {
  it("pushes the schema to every database; not on a terminal, progress is one plain line per step on stderr", async () => {
    const run = await shardkit(["rollout", "--config", config, "--schema", SCHEMA]);
    expect(run.code).toBe(0);
    expect(run.stderr.trimEnd().split("\n")).toEqual([
      `rollout [0/3] ${urls[0]}: rolling out`,
      expect.stringMatching(
        new RegExp(`^rollout \\[1/3\\] ${urls[0]}: applied \\(6 changes\\), [\\d.]+ (ms|s)$`),
      ),
      `rollout [1/3] ${urls[1]}: rolling out`,
      expect.stringMatching(new RegExp(`^rollout \\[2/3\\] ${urls[1]}: applied`)),
      `rollout [2/3] ${urls[2]}: rolling out`,
      expect.stringMatching(new RegExp(`^rollout \\[3/3\\] ${urls[2]}: applied`)),
    ]);
    expect(run.stdout).toMatch(new RegExp(`^${urls[2]}\\s+\\(spare\\)\\s+applied\\s+6\\s`, "m"));
    expect(run.stdout).toContain("push: 3 applied, 0 unchanged, 3 databases");
    for (const url of urls)
      expect(await tables(url)).toEqual([
        "OutboxEvent",
        "ShardMove",
        "ShardMoveChange",
        "ShardOwnership",
        "Wallet",
      ]);
  });

  it("a second run changes nothing; --json is the report and --no-progress keeps stderr quiet", async () => {
    const run = await shardkit([
      "rollout",
      "--config",
      config,
      "--schema",
      SCHEMA,
      "--json",
      "--no-progress",
    ]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ mode: "push", ok: true });
    expect(
      report.targets.map((t: { name: string; status: string; shards: string[] }) => [
        t.name,
        t.status,
        t.shards,
      ]),
    ).toEqual([
      [urls[0], "unchanged", ["0/0"]],
      [urls[1], "unchanged", ["0/1"]],
      [urls[2], "unchanged", []],
    ]);
  });

  it("--concurrency works on several databases at once; progress counts the databases finished", async () => {
    const run = await shardkit(["rollout", "--config", config, "--schema", SCHEMA, "--concurrency", "3"]);
    expect(run.code).toBe(0);
    const lines = run.stderr.trimEnd().split("\n");
    // Three starts and three ends, in whatever order the databases finish; each end counts one more.
    expect(lines.filter((l) => l.endsWith(": rolling out"))).toHaveLength(3);
    const ends = lines.filter((l) => !l.endsWith(": rolling out"));
    expect(ends.map((l) => l.slice(0, "rollout [1/3]".length))).toEqual([
      "rollout [1/3]",
      "rollout [2/3]",
      "rollout [3/3]",
    ]);
    expect(ends.map((l) => l.split(" ")[2]!.replace(/:$/, "")).sort()).toEqual([...urls].sort());
    expect(run.stdout).toContain("push: 0 applied, 3 unchanged, 3 databases");
    const bad = await shardkit(["rollout", "--config", config, "--schema", SCHEMA, "--concurrency", "0"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--concurrency must be a positive integer");
  });

  it("on a terminal, progress is a bar redrawn in place", () => {
    // `script` gives the command a pseudo-terminal, as a person's shell would.
    const command = [process.execPath, BIN, "rollout", "--config", config, "--schema", SCHEMA]
      .map((a) => `'${a}'`)
      .join(" ");
    const out = execFileSync("script", ["-qec", command, "/dev/null"], {
      encoding: "utf8",
      timeout: patient(50_000),
    });
    expect(out).toMatch(/rollout \[=+-*\] \d\/3 /);
    expect(out).toMatch(/rollout \[={24}\] 3\/3 /);
    expect(out).not.toMatch(/rollout \[\d\/3\]/); // no plain lines
  });

  it("a push that fails stops there and says where: exit 1; a schema that cannot be read: exit 2", async () => {
    // A row the schema's NOT NULL column cannot take without losing data: the push refuses.
    await withClient(urls[1]!, async (client) => {
      await client.query(`ALTER TABLE "Wallet" ALTER COLUMN owner DROP NOT NULL`);
      await client.query(`INSERT INTO "Wallet" (id, owner) VALUES (gen_random_uuid(), NULL)`);
    });
    const failed = await shardkit(["rollout", "--config", config, "--schema", SCHEMA, "--json"]);
    expect(failed.code).toBe(1);
    const report = JSON.parse(failed.stdout);
    expect(report.ok).toBe(false);
    expect(report.targets.map((t: { status: string }) => t.status)).toEqual([
      "unchanged",
      "failed",
      "skipped",
    ]);
    expect(failed.stderr).toMatch(new RegExp(`rollout \\[2/3\\] ${urls[1]}: failed`));
    const unreadable = await shardkit(["rollout", "--config", config, "--schema", "/nonexistent.prisma"]);
    expect(unreadable.code).toBe(2);
    expect(unreadable.stderr).toContain("cannot read the schema /nonexistent.prisma");
    const neither = await shardkit(["rollout", "--config", config]);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain(
      "give --schema <schema.prisma> (push) or --migrations <folder> (migrate)",
    );
  });
});
