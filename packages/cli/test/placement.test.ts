import { MAIN_PORT } from "@shardkit/test-db";
import { beforeAll, describe, expect, it } from "vitest";
import { configFile, SLOW, shardkit, testDatabases } from "./cli.js";
import { rowsPerShard, seed } from "./seed.js";

// Placement rules through the CLI: eu holds 0/0 and 1/0, us holds 2/0; group 1 and group 2 may live
// only in region eu, so 2/0 already breaks its rule (doctor reports it) and 1/0 may not move to us.
const { urls } = testDatabases("pl", { eu: MAIN_PORT, us: MAIN_PORT });
const placed = () => ({
  shards: [
    { group: 0, member: 0, url: urls.eu, pool: 2, labels: { region: "eu" } },
    { group: 1, member: 0, url: urls.eu, pool: 2 },
    { group: 2, member: 0, url: urls.us, pool: 2, labels: { region: "us" } },
  ],
  placement: [{ groups: [1, 2], labels: { region: "eu" } }],
});
let config = "";
beforeAll(async () => {
  await seed(urls.eu, { "0/0": 3, "1/0": 4 });
  await seed(urls.us, { "2/0": 5 });
  config = configFile("pl", placed());
});

const rule = (db: string, has: string, group = 1) =>
  `placement[0]: group ${group} may live only on region=eu; database "${db}" has ${has}`;

/** An offline move of 1/0 to us, the database its rule forbids. */
const moveToUs = (...flags: string[]) =>
  shardkit([
    "move",
    "1/0",
    "--config",
    config,
    "--to",
    urls.us,
    "--table",
    "Wallet",
    "--mode",
    "offline",
    ...flags,
  ]);

describe("placement rules in the CLI", () => {
  it("doctor reports a shard on a database its rule does not allow, naming shard, database and rule; from a file or SHARDKIT_SHARDS", async () => {
    const [file, env, json] = await Promise.all([
      shardkit(["doctor", "--config", config, ...SLOW]),
      shardkit(["doctor", ...SLOW], { env: { SHARDKIT_SHARDS: JSON.stringify(placed()) } }),
      shardkit(["doctor", "--config", config, "--json", ...SLOW]),
    ]);
    for (const run of [file, env]) {
      expect(run.code, run.stderr).toBe(1);
      expect(run.stdout).toMatch(
        /^placement\s+FAIL\s+1 of 3 shards on a database their rule does not allow$/m,
      );
      expect(run.stdout).toContain(
        `error: placement: shard 2/0 is on ${urls.us}, which breaks ${rule(urls.us, "region=us", 2)}: move it (shardkit move 2/0 --to ...) to a database the rule allows`,
      );
    }
    const report = JSON.parse(json.stdout);
    expect(report.findings.filter((f: { check: string }) => f.check === "placement")).toEqual([
      {
        check: "placement",
        severity: "error",
        message: expect.stringContaining("shard 2/0 is on"),
        databases: [urls.us],
      },
    ]);

    // Without rules the check is skipped; with every shard where its rule allows, it passes.
    const [none, fine] = await Promise.all([
      shardkit(["doctor", "--config", configFile("pl-none", { shards: placed().shards }), ...SLOW]),
      shardkit([
        "doctor",
        "--config",
        configFile("pl-fine", { ...placed(), placement: [{ groups: 1, labels: { region: "eu" } }] }),
        ...SLOW,
      ]),
    ]);
    expect(none.stdout).toMatch(/^placement\s+skipped\s+no placement rules$/m);
    expect(fine.stdout).toMatch(/^placement\s+ok\s+3 shards checked against 1 rule, none misplaced$/m);
  });

  it("move to a database the rule forbids is refused before anything changes: exit 1, the rule named; its dry run lists it", async () => {
    const before = [await rowsPerShard(urls.eu), await rowsPerShard(urls.us)];
    const [run, dry] = await Promise.all([moveToUs(), moveToUs("--dry-run", ...SLOW)]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toBe(
      `shardkit move: shard 1/0 may not move to ${urls.us}: ${rule(urls.us, "region=us")} (nothing was changed)\n`,
    );
    expect(dry.code, dry.stderr).toBe(1);
    expect(dry.stdout).toContain(`  - ${urls.us} may not hold shard 1/0: ${rule(urls.us, "region=us")}\n`);
    expect([await rowsPerShard(urls.eu), await rowsPerShard(urls.us)]).toEqual(before);

    const json = await moveToUs("--json");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, error: { code: "PLACEMENT_RULE" } });
  });

  it("a configuration whose rule names an unknown label is refused before any database is asked: exit 2", async () => {
    const bad = configFile("pl-bad", { ...placed(), placement: [{ groups: 1, labels: { zone: "a" } }] });
    const run = await shardkit(["doctor", "--config", bad, ...SLOW]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      "placement[0].labels.zone: unknown label: no database of the configuration has a zone label (they have region)",
    );
  });
});
