import { createServer } from "node:net";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { MAIN_PORT } from "@shardkit/test-db";
import { beforeAll, describe, expect, it } from "vitest";
import { configFile, shardkit, testDatabases } from "./cli.js";
import { sql } from "./pg.js";

const { urls } = testDatabases("redrive", { a: MAIN_PORT, b: MAIN_PORT });
let config = "";
const ids = { a: [] as string[], b: [] as string[] };

beforeAll(async () => {
  config = configFile("redrive", [
    { group: 0, member: 0, url: urls.a },
    { group: 1, member: 0, url: urls.b },
  ]);
  // Dead letters: three on a (two of topic wallet.debited), two on b; a delivered event on a.
  const events = [
    [0, "a", "wallet.debited", "dead"],
    [0, "a", "wallet.debited", "dead"],
    [0, "a", "wallet.credited", "dead"],
    [0, "a", "wallet.debited", "delivered"],
    [1, "b", "wallet.debited", "dead"],
    [1, "b", "wallet.credited", "dead"],
  ] as const;
  for (const [group, key, topic, status] of events) {
    const id = ShardedUUID.generate(ShardIdentifier.of(group, 0));
    if (status === "dead") ids[key].push(id);
    await sql(
      urls[key],
      `INSERT INTO "OutboxEvent" (id, topic, "aggregateId", payload, status, attempts, "lastError")
       VALUES ($1, $2, $1, '{}', $3, 10, 'consumer said no')`,
      [id, topic, status],
    );
  }
});

function statuses(url: string) {
  return sql(url, `SELECT id::text, topic, status, attempts, "lastError" FROM "OutboxEvent" ORDER BY id`);
}

describe("shardkit redrive", () => {
  it("by topic: only that topic's dead letters go back to pending, attempts reset, on every database", async () => {
    const run = await shardkit(["redrive", "--config", config, "--topic", "wallet.debited"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^${urls.a}\\s+0/0\\s+2$`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${urls.b}\\s+1/0\\s+1$`, "m"));
    expect(run.stdout).toContain("3 dead letters back to pending");
    const a = await statuses(urls.a);
    expect(a.filter((r) => r.topic === "wallet.debited" && r.status === "pending")).toHaveLength(2);
    expect(
      a.filter((r) => r.status === "pending").every((r) => r.attempts === 0 && r.lastError === null),
    ).toBe(true);
    expect(a.find((r) => r.topic === "wallet.credited")!.status).toBe("dead");
    expect(a.filter((r) => r.status === "delivered")).toHaveLength(1);
  });

  it("by id, with --json for scripts; then everything else; a malformed id exits 2", async () => {
    const byId = await shardkit(["redrive", "--config", config, "--id", ids.a[2]!, "--json"]);
    expect(byId.code).toBe(0);
    expect(JSON.parse(byId.stdout)).toEqual({
      ok: true,
      databases: [
        { database: urls.a, shards: "0/0", redriven: 1 },
        { database: urls.b, shards: "1/0", redriven: 0 },
      ],
      redriven: 1,
      filter: { topic: null, ids: [ids.a[2]] },
    });
    const rest = await shardkit(["redrive", "--config", config, "--json"]);
    expect(JSON.parse(rest.stdout).redriven).toBe(1); // b's wallet.credited; one (b's debited) went before
    expect((await statuses(urls.b)).map((r) => r.status)).toEqual(["pending", "pending"]);
    const bad = await shardkit(["redrive", "--config", config, "--id", "not-a-uuid"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--id "not-a-uuid": not a ShardedUUID');
  });
});

/** A port nothing listens on: a database server that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("shardkit redrive with a database down", () => {
  it("redrives the databases that answer, names the one that did not, and exits 1", async () => {
    const id = ShardedUUID.generate(ShardIdentifier.of(0, 0));
    await sql(
      urls.a,
      `INSERT INTO "OutboxEvent" (id, topic, "aggregateId", payload, status, attempts, "lastError")
       VALUES ($1, 'wallet.closed', $1, '{}', 'dead', 10, 'consumer said no')`,
      [id],
    );
    const down = `postgresql://127.0.0.1:${await closedPort()}/nothing`;
    const withDown = configFile("redrive-down", [
      { group: 0, member: 0, url: urls.a },
      { group: 1, member: 0, url: urls.b },
      { group: 2, member: 0, url: down },
    ]);
    const text = await shardkit(["redrive", "--config", withDown, "--topic", "wallet.closed"]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(new RegExp(`^${urls.a}\\s+0/0\\s+1$`, "m"));
    expect(text.stdout).toMatch(new RegExp(`^${down}\\s+2/0\\s+no answer: `, "m"));
    expect(text.stdout).toContain(
      `${down} did not answer: its dead letters were not redriven (run it again)`,
    );
    expect((await statuses(urls.a)).find((r) => r.id === id)!.status).toBe("pending");

    const json = await shardkit(["redrive", "--config", withDown, "--topic", "wallet.closed", "--json"]);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report).toMatchObject({ ok: false, redriven: 0 });
    expect(
      report.databases.map((d: { database: string; redriven: number | null }) => [d.database, d.redriven]),
    ).toEqual([
      [urls.a, 0],
      [urls.b, 0],
      [down, null],
    ]);
    expect(report.databases[2].error).toEqual(expect.any(String));
  });
});
