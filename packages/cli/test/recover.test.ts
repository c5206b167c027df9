import { createHash, randomBytes } from "node:crypto";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { IDENTITY_COLUMNS, identityOf } from "@shardkit/prisma/internal";
import { createDatabase, dropDatabase, MAIN_PORT, patient, shareCluster } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDashboard } from "../src/dashboard/server.js";
import { configFile, SLOW, shardkit } from "./cli.js";
import { withClient } from "./pg.js";

// `shardkit recover`, and the in-doubt atomic actions `status` and `doctor` list. Two databases on the
// server of the atomic-action tests (max_prepared_transactions = 50, shared with @shardkit/prisma's and
// @shardkit/ownership's when runs overlap). The prepared transactions are made here by hand, as a
// coordinator that died would leave them: a test controls their age through `--lease` (0: every one
// is past it; an hour: none is), never by waiting.
const SERVER = { cluster: "skatomic", port: 5461 };
const names = { x: `sk_cli_recover_x_${process.pid}`, y: `sk_cli_recover_y_${process.pid}` };
const urls = { x: "", y: "" };
const ids = { x: "", y: "" };
const X = ShardIdentifier.of(0, 1);
const Y = ShardIdentifier.of(1, 0);
let release: (() => Promise<void>) | undefined;
let config = "";

const DECISIONS = `CREATE TABLE "AtomicDecision" (id text PRIMARY KEY, decision text NOT NULL,
  coordinator text NOT NULL, participants text NOT NULL, "createdAt" timestamptz(3) NOT NULL DEFAULT now())`;

beforeAll(async () => {
  release = await shareCluster(SERVER.cluster, SERVER.port, { settings: { max_prepared_transactions: 50 } });
  for (const key of ["x", "y"] as const) {
    urls[key] = await createDatabase(SERVER.port, names[key]);
    ids[key] = await withClient(urls[key], async (c) => {
      await c.query(DECISIONS);
      await c.query(`CREATE TABLE "Wallet" (id uuid PRIMARY KEY, balance int NOT NULL)`);
      const { rows } = await c.query(`SELECT ${IDENTITY_COLUMNS}`);
      return createHash("sha256").update(identityOf(rows[0])).digest("hex").slice(0, 10);
    });
  }
  config = configFile("recover", [
    { group: 0, member: 1, url: urls.x },
    { group: 1, member: 0, url: urls.y },
  ]);
}, patient(180_000));

afterAll(async () => {
  for (const key of ["x", "y"] as const) {
    await withClient(urls[key], async (c) => {
      const { rows } = await c.query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()");
      for (const r of rows) await c.query(`ROLLBACK PREPARED '${r.gid}'`);
    }).catch(() => {});
    await dropDatabase(SERVER.port, names[key]).catch(() => {});
  }
  await release?.();
}, patient(120_000));

/**
 * A transfer of `amount` from a new wallet on x (100) to a new wallet on y (0), left by a coordinator
 * that died. Wallets of their own: a prepared transaction holds its rows' locks until it is concluded.
 */
async function orphan(amount: number, decider = ids.x) {
  const wallets = { x: ShardedUUID.generate(X), y: ShardedUUID.generate(Y) };
  for (const key of ["x", "y"] as const)
    await withClient(urls[key], (c) =>
      c.query(`INSERT INTO "Wallet" VALUES ($1, $2)`, [wallets[key], key === "x" ? 100 : 0]),
    );
  const action = randomBytes(6).toString("hex");
  const coordinator = `p${4000 + Math.floor(Math.random() * 1000)}-${randomBytes(3).toString("hex")}`;
  const gid = (self: string, shard: ShardIdentifier) =>
    `sk2pc:${action}:${coordinator}:2:${decider}:${self}:${shard.bits}`;
  const participants = JSON.stringify([
    { database: ids.x, shards: [X.bits] },
    { database: ids.y, shards: [Y.bits] },
  ]);
  const debit = async (prepare: boolean) =>
    withClient(urls.x, async (c) => {
      await c.query("BEGIN");
      await c.query(`UPDATE "Wallet" SET balance = balance - $1 WHERE id = $2`, [amount, wallets.x]);
      await c.query(
        `INSERT INTO "AtomicDecision" (id, decision, coordinator, participants) VALUES ($1, 'commit', $2, $3)`,
        [`${action}.${coordinator}`, coordinator, participants],
      );
      await c.query(prepare ? `PREPARE TRANSACTION '${gid(ids.x, X)}'` : "COMMIT");
    });
  const credit = () =>
    withClient(urls.y, async (c) => {
      await c.query("BEGIN");
      await c.query(`UPDATE "Wallet" SET balance = balance + $1 WHERE id = $2`, [amount, wallets.y]);
      await c.query(`PREPARE TRANSACTION '${gid(ids.y, Y)}'`);
    });
  const balance = (key: "x" | "y") =>
    withClient(
      urls[key],
      async (c) =>
        (await c.query(`SELECT balance FROM "Wallet" WHERE id = $1`, [wallets[key]])).rows[0].balance,
    );
  return {
    action: `${action}.${coordinator}`,
    balances: async () => ({ x: await balance("x"), y: await balance("y") }),
    /** Died after the decision: the decider committed (its debit and the decision), the credit is prepared. */
    async decided() {
      await debit(false);
      await credit();
    },
    /** Died after both prepared, before the decision: both prepared, nothing decided. */
    async undecided() {
      await debit(true);
      await credit();
    },
    /** Only the credit, prepared, naming a deciding database that is not in the configuration. */
    async foreign() {
      await credit();
    },
  };
}

const prepared = async () =>
  (
    await Promise.all(
      [urls.x, urls.y].map((u) =>
        withClient(
          u,
          async (c) =>
            (
              await c.query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
            ).rows,
        ),
      ),
    )
  ).flat();

const HOUR = ["--lease", "3600000"];

describe("shardkit recover", () => {
  it("lists, concludes and leaves: status and doctor count them, --dry-run changes nothing, within the lease they stay (exit 4), past it commit or roll back (exit 0)", async () => {
    const decided = await orphan(30);
    const undecided = await orphan(20);
    await decided.decided();
    await undecided.undecided();

    const [status, doctor] = await Promise.all([
      shardkit(["status", "--config", config, "--lease", "0", ...SLOW]),
      shardkit(["doctor", "--config", config, "--lease", "0", "--json", ...SLOW]),
    ]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain("atomic actions in doubt: 3 prepared transactions");
    expect(status.stdout).toMatch(new RegExp(`^${urls.x}\\s+1\\s+\\S+ (ms|s)\\s+roll back 1$`, "m"));
    expect(status.stdout).toMatch(
      new RegExp(`^${urls.y}\\s+2\\s+\\S+ (ms|s)\\s+commit 1, roll back 1$`, "m"),
    );
    const report = JSON.parse(doctor.stdout);
    expect(report.checks).toContainEqual(expect.objectContaining({ check: "in_doubt", status: "warning" }));
    expect(report.checks).toContainEqual({
      check: "atomic",
      status: "ok",
      summary: "max_prepared_transactions > 0 on 2 databases: atomic actions can run",
    });
    expect(report.inDoubt.databases).toEqual([
      expect.objectContaining({ database: urls.x, count: 1, commit: 0, rollBack: 1, leave: 0 }),
      expect.objectContaining({ database: urls.y, count: 2, commit: 1, rollBack: 1, leave: 0 }),
    ]);

    const dry = await shardkit(["recover", "--config", config, "--lease", "0", "--dry-run", ...SLOW]);
    expect(dry.code, dry.stderr).toBe(4);
    expect(dry.stdout).toMatch(/^DATABASE\s+ACTION\s+SHARDS\s+AGE\s+DECISION\s+WOULD\s+WHY$/m);
    expect(dry.stdout).toMatch(
      new RegExp(
        `^${urls.y}\\s+${decided.action.replace(".", "\\.")}\\s+1/0\\s+.*\\scommit\\s+commit\\s+its deciding database recorded commit$`,
        "m",
      ),
    );
    expect(dry.stdout).toMatch(
      new RegExp(
        `^${urls.x}\\s+${undecided.action.replace(".", "\\.")}\\s+0/1\\s+.*\\sundecided\\s+roll back\\s+no decision recorded`,
        "m",
      ),
    );
    expect(await prepared()).toHaveLength(3);

    const young = await shardkit(["recover", "--config", config, ...HOUR, ...SLOW]);
    expect(young.code, young.stderr).toBe(4);
    expect(young.stdout).toContain("committed 0, rolled back 0; 3 prepared transactions left in doubt");
    expect(young.stdout).toMatch(
      /left: sk2pc:\S+ on \S+: within its coordinator's lease \(\d+ min \d+ s left\)/,
    );
    expect(young.stdout).toContain("run `shardkit recover` again once the lease has lapsed");
    expect(await prepared()).toHaveLength(3);

    const run = await shardkit(["recover", "--config", config, "--lease", "0", "--json", ...SLOW]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^recover \[1\/3\] (committed|rolled back) sk2pc:/m);
    expect(run.stderr).toMatch(/^recover \[3\/3\] /m);
    const done = JSON.parse(run.stdout);
    expect(done).toMatchObject({ ok: true, exitCode: 0, committed: 1, rolledBack: 2, unanswered: [] });
    expect(done.remaining.transactions).toEqual([]);
    expect(await prepared()).toEqual([]);
    // All or nothing, counted: the decided transfer arrived, the undecided one left no trace.
    expect(await decided.balances()).toEqual({ x: 70, y: 30 });
    expect(await undecided.balances()).toEqual({ x: 100, y: 0 });

    const again = await shardkit(["recover", "--config", config, ...SLOW]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(`no atomic action in doubt on the databases of ${config}\n`);
  });

  it("a prepared transaction whose deciding database is not in the configuration is left and named: exit 1, doctor fails", async () => {
    await (await orphan(5, "ffffffffff")).foreign();
    const [run, doctor] = await Promise.all([
      shardkit(["recover", "--config", config, "--lease", "0", ...SLOW]),
      shardkit(["doctor", "--config", config, ...SLOW]),
    ]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toContain("its deciding database is not in this configuration or did not answer");
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/^in_doubt\s+FAIL\s/m);
    expect(doctor.stdout).toContain("recover them with a configuration that lists it");
    // The dashboard names it among its problems, as an error on its database.
    const dashboard = await startDashboard({ config, port: 0, timeoutMs: patient(20_000) });
    try {
      expect(dashboard.snapshot().problems).toContainEqual(
        expect.objectContaining({
          kind: "in-doubt",
          level: "error",
          text: expect.stringContaining("whose deciding database is not in this configuration"),
        }),
      );
    } finally {
      await dashboard.close();
    }
    await withClient(urls.y, async (c) => {
      const { rows } = await c.query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()");
      for (const r of rows) await c.query(`ROLLBACK PREPARED '${r.gid}'`);
    });
  });

  it("doctor: a database on a server without prepared transactions beside ones with them is a warning naming it", async () => {
    const name = `sk_cli_recover_plain_${process.pid}`;
    const plain = await createDatabase(MAIN_PORT, name);
    try {
      const mixed = configFile("recover-mixed", [
        { group: 0, member: 1, url: urls.x },
        { group: 1, member: 0, url: plain },
      ]);
      const run = await shardkit(["doctor", "--config", mixed, "--json", ...SLOW]);
      const report = JSON.parse(run.stdout);
      expect(report.checks).toContainEqual({
        check: "atomic",
        status: "warning",
        summary: "1 of 2 databases refuse atomic actions (max_prepared_transactions = 0)",
      });
      const [finding] = report.findings.filter((f: { check: string }) => f.check === "atomic");
      expect(finding).toMatchObject({ severity: "warning", databases: [plain] });
      expect(finding.message).toContain(`with a part on ${plain} are refused: max_prepared_transactions = 0`);
    } finally {
      await dropDatabase(MAIN_PORT, name).catch(() => {});
    }
  });

  it("a bad configuration or flag: exit 2 with what is wrong, nothing read", async () => {
    const missing = await shardkit(["recover", "--config", "/nonexistent/shards.json"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^shardkit recover: cannot read the configuration file \/nonexistent\/shards\.json/,
    );
    const none = await shardkit(["recover"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no shard configuration: pass --config <file> or set SHARDKIT_SHARDS");
    const wrong = await shardkit(["recover", "--json"], {
      env: { SHARDKIT_SHARDS: JSON.stringify([{ group: 0, member: 99, url: urls.x }]) },
    });
    expect(wrong.code).toBe(2);
    expect(JSON.parse(wrong.stdout).error.code).toBe("INVALID_CONFIG");
    const lease = await shardkit(["recover", "--config", config, "--lease", "soon"]);
    expect(lease.code).toBe(2);
    expect(lease.stderr).toContain("--lease must be an integer >= 0.");
  });
});
