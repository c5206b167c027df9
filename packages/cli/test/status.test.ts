import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { MAIN_PORT, patient, withClusterFrozen, withClusterStopped } from "@shardkit/test-db";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { configFile, SLOW, shardkit, testDatabases } from "./cli.js";
import { fileServer } from "./clusters.js";

// Three databases: a and b on the machine's server, c on a server of the file's own
// (test/clusters.ts), which tests stop and freeze to see `status` name it.
const DOWN = fileServer("skclidown");
const { urls } = testDatabases("status", { a: MAIN_PORT, b: MAIN_PORT, c: DOWN });
let config = "";

beforeAll(async () => {
  // Two dead letters and a pending event on shard 0/1 (database a).
  const client = new pg.Client({ connectionString: urls.a });
  await client.connect();
  for (const status of ["dead", "dead", "pending"]) {
    const id = ShardedUUID.generate(ShardIdentifier.of(0, 1));
    await client.query(
      `INSERT INTO "OutboxEvent" (id, topic, "aggregateId", payload, status, attempts) VALUES ($1, 'wallet.debited', $1, '{}', $2, 10)`,
      [id, status],
    );
  }
  await client.end();
  config = configFile("status", [
    { group: 0, member: 0, url: urls.a },
    { group: 0, member: 1, url: urls.a },
    { group: 1, member: 0, url: urls.b },
    { group: 2, member: 0, url: urls.c },
  ]);
});

describe("shardkit status", () => {
  it("every shard up: each shard's database, epoch and state, each database's outbox; exit 0", async () => {
    const run = await shardkit(["status", "--config", config, ...SLOW]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines[1]).toMatch(/^SHARD\s+DATABASE\s+REACHABLE\s+LATENCY\s+EPOCH\s+OWNER STATE$/);
    expect(lines.find((l) => l.startsWith("0/1 "))).toMatch(
      new RegExp(`^0/1\\s+${urls.a}\\s+yes\\s+[\\d.]+ ms\\s+-\\s+unrecorded`),
    );
    expect(lines.find((l) => l.startsWith(urls.a))).toMatch(/0\/0,0\/1\s+1\s+[\d.]+ (ms|s)\s+2$/);
    expect(run.stdout).toContain("2 dead letters: `shardkit redrive` puts them back to pending");
  });

  it("reads SHARDKIT_SHARDS the same way, and --json gives the same facts to scripts; spares hold no outbox", async () => {
    const shards = {
      shards: [{ group: 0, member: 1, url: urls.a }],
      databases: [{ url: urls.b }, { url: urls.c }],
    };
    const run = await shardkit(["status", "--json", ...SLOW], {
      env: { SHARDKIT_SHARDS: JSON.stringify(shards) },
    });
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({
      ok: true,
      config: "SHARDKIT_SHARDS",
      unreachable: [],
      deadLetters: 2,
      shards: [{ shard: "0/1", database: urls.a, reachable: "yes", state: "unrecorded", epoch: null }],
      databases: [
        { database: urls.a, shards: ["0/1"], outbox: "present", pending: 1, dead: 2 },
        { database: urls.b, shards: [], reachable: "yes", outbox: "spare", dead: null },
        { database: urls.c, shards: [], reachable: "yes", outbox: "spare", dead: null },
      ],
    });
  });

  it("a database that is down: named in the table and on its own line, exit 1; the others are still reported", async () => {
    const [text, json] = await withClusterStopped(DOWN.cluster, DOWN.port, () =>
      Promise.all([
        shardkit(["status", "--config", config, ...SLOW]),
        shardkit(["status", "--config", config, "--json", ...SLOW]),
      ]),
    );
    expect(text.code, text.stderr).toBe(1);
    expect(text.stdout, text.stderr).toMatch(new RegExp(`^2/0\\s+${urls.c}\\s+NO\\s`, "m"));
    expect(text.stdout).toMatch(/^0\/0\s+\S+\s+yes\s/m);
    expect(text.stdout).toContain(`1 database of 3 unreachable:\n  ${urls.c}: `);
    expect(json.code, json.stderr).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report.ok).toBe(false);
    expect(report.unreachable).toEqual([urls.c]);
    expect(report.shards.find((s: { shard: string }) => s.shard === "2/0")).toMatchObject({
      reachable: "no",
      state: "unknown",
      error: expect.stringMatching(/./),
    });
    expect(report.databases.find((d: { database: string }) => d.database === urls.c)).toMatchObject({
      reachable: "no",
      outbox: "unavailable",
      dead: null,
    });
  });

  it("a database that does not answer in time (frozen): `slow` in its rows and at the end, never `yes` and unreachable at once; exit 1", async () => {
    const quick = ["--timeout", "1500"];
    const [text, json] = await withClusterFrozen(DOWN.cluster, () =>
      Promise.all([
        shardkit(["status", "--config", config, ...quick]),
        shardkit(["status", "--config", config, "--json", ...quick]),
      ]),
    );
    expect(text.code, text.stderr).toBe(1);
    expect(text.stdout).toMatch(new RegExp(`^2/0\\s+${urls.c}\\s+slow\\s`, "m"));
    expect(text.stdout).toMatch(
      new RegExp(
        `databases? of 3 slow \\(busy or frozen, not known to be down[^\\n]*\\n(  .*\\n)*  ${urls.c}: did not answer within 1500 ms`,
      ),
    );
    expect(text.stdout).not.toMatch(new RegExp(`unreachable:(\\n  .*)*\\n  ${urls.c}:`));
    expect(json.code, json.stderr).toBe(1);
    const report = JSON.parse(json.stdout);
    expect(report.ok).toBe(false);
    expect(report.slow).toContain(urls.c);
    expect(report.unreachable).not.toContain(urls.c);
    // One value per database: each row says what its database says, and the lists follow it.
    const byName = new Map<string, string>(
      report.databases.map((d: { database: string; reachable: string }) => [d.database, d.reachable]),
    );
    expect(byName.get(urls.c)).toBe("slow");
    for (const s of report.shards as { database: string; reachable: string }[])
      expect(s.reachable).toBe(byName.get(s.database));
    for (const [name, answer] of byName) {
      expect(report.slow.includes(name)).toBe(answer === "slow");
      expect(report.unreachable.includes(name)).toBe(answer === "no");
    }
    // The text the same way: a row's word is its database's, listed at the end under that word only.
    const listed = (heading: RegExp) => {
      const lines = text.stdout.split("\n");
      const at = lines.findIndex((l) => heading.test(l));
      if (at < 0) return [];
      const names: string[] = [];
      for (const l of lines.slice(at + 1)) {
        if (!l.startsWith("  ")) break;
        names.push(l.slice(2, l.indexOf(": ")));
      }
      return names;
    };
    const slowListed = listed(/of 3 slow /);
    const downListed = listed(/of 3 unreachable:$/);
    expect(slowListed).toContain(urls.c);
    for (const line of text.stdout.split("\n").filter((l) => /^\d+\/\d+\s/.test(l))) {
      const [, database, word] = line.split(/\s+/);
      expect([word, slowListed.includes(database!), downListed.includes(database!)]).toEqual([
        word,
        word === "slow",
        word === "NO",
      ]);
    }
  });

  it(
    "a server that accepts connections late: `yes` within a --timeout longer than the wait (the connect deadline is --timeout, not a fixed 5 s), `slow` within a shorter one, never `no`",
    async () => {
      // b behind a proxy that holds every new connection 6 s before passing it on (a busy host).
      const HOLD_MS = 6000;
      const sockets: Socket[] = [];
      const proxy = createServer((socket) => {
        sockets.push(socket);
        const held = setTimeout(() => {
          const upstream = connect(
            new URL(urls.b).port ? Number(new URL(urls.b).port) : MAIN_PORT,
            "127.0.0.1",
          );
          sockets.push(upstream);
          socket.pipe(upstream).pipe(socket);
          upstream.on("error", () => socket.destroy());
        }, HOLD_MS);
        socket.on("error", () => clearTimeout(held));
        socket.on("close", () => clearTimeout(held));
      });
      await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
      try {
        const late = new URL(urls.b);
        late.port = String((proxy.address() as AddressInfo).port);
        const delayed = configFile("status-late", [
          { group: 0, member: 0, url: urls.a },
          { group: 1, member: 0, url: late.toString() },
        ]);
        const patientRun = await shardkit([
          "status",
          "--config",
          delayed,
          "--json",
          "--timeout",
          String(HOLD_MS + patient(10_000)),
        ]);
        expect(patientRun.code, patientRun.stderr).toBe(0);
        const answered = JSON.parse(patientRun.stdout) as {
          databases: { database: string; reachable: string }[];
        };
        expect(answered.databases.map((d) => d.reachable)).toEqual(["yes", "yes"]);

        const hasty = await shardkit(["status", "--config", delayed, "--json", "--timeout", "1000"]);
        expect(hasty.code).toBe(1);
        const report = JSON.parse(hasty.stdout) as {
          databases: { database: string; reachable: string }[];
          slow: string[];
          unreachable: string[];
        };
        expect(report.databases.find((d) => d.database === late.toString())?.reachable).toBe("slow");
        // Never `no`; a (direct) is `slow` too when the host cannot answer it within 1 s either.
        expect(report.slow).toContain(late.toString());
        expect(report.unreachable).toEqual([]);
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => proxy.close(resolve));
      }
    },
    patient(120_000),
  );

  it("records that cannot be right (a shard with two owners) are listed; exit 1", async () => {
    const bits = ShardIdentifier.of(1, 0).bits;
    const record = async (url: string, sql: string, values: unknown[] = []) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(sql, values);
      await client.end();
    };
    const insert = `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES ($1, $2, 'owned')`;
    // a holds its own shards' records, as an opened map leaves them, and a second owner of 1/0.
    for (const own of [ShardIdentifier.of(0, 0), ShardIdentifier.of(0, 1)])
      await record(urls.a, insert, [own.bits, 1]);
    await record(urls.a, insert, [bits, 1]);
    await record(urls.b, insert, [bits, 2]);
    try {
      const text = await shardkit(["status", "--config", config, ...SLOW]);
      expect(text.code, text.stderr).toBe(1);
      expect(text.stdout).toContain(
        `1 problem with the ownership records (a partition map would refuse them):\n  shard 1/0 has two owners: ${urls.a} (epoch 1) and ${urls.b} (epoch 2)\n`,
      );
      const json = await shardkit(["status", "--config", config, "--json", ...SLOW]);
      expect(json.code).toBe(1);
      const report = JSON.parse(json.stdout);
      expect(report).toMatchObject({ ok: false, unreachable: [] });
      expect(report.issues).toEqual([
        `shard 1/0 has two owners: ${urls.a} (epoch 1) and ${urls.b} (epoch 2)`,
      ]);
    } finally {
      await record(urls.a, `DELETE FROM "ShardOwnership"`);
      await record(urls.b, `DELETE FROM "ShardOwnership"`);
    }
    const clean = await shardkit(["status", "--config", config, "--json", ...SLOW]);
    expect(JSON.parse(clean.stdout).issues).toEqual([]);
  });

  it("a move that stopped half-way (its lease lapsed) is listed with its holder and step; exit 1", async () => {
    const client = new pg.Client({ connectionString: urls.a });
    await client.connect();
    const bits = ShardIdentifier.of(0, 1).bits;
    await client.query(
      `INSERT INTO "ShardMove" (shard, target, step, attempt, token, holder, "expiresAt")
       VALUES ($1, 'elsewhere:5432/x', 'fenced', 'a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4', 1, 'mover 4242', clock_timestamp() - interval '90 seconds')`,
      [bits],
    );
    try {
      const text = await shardkit(["status", "--config", config, ...SLOW]);
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(
        new RegExp(
          `1 move stopped half-way \\(the next \`shardkit move\` of the shard takes it over and finishes or undoes it\\):\n  0/1: ${urls.a.replaceAll("/", "\\/")} -> elsewhere:5432/x, stopped at fenced, held by mover 4242, lease lapsed \\d+ min \\d\\d s ago`,
        ),
      );
      const json = JSON.parse((await shardkit(["status", "--config", config, "--json", ...SLOW])).stdout);
      expect(json.stopped).toEqual([
        {
          shard: "0/1",
          from: urls.a,
          to: "elsewhere:5432/x",
          step: "fenced",
          holder: "mover 4242",
          expiresInMs: expect.any(Number),
        },
      ]);
      expect(json.moves).toEqual([]);
    } finally {
      await client.query(`DELETE FROM "ShardMove"`);
      await client.end();
    }
  });

  it("configuration errors exit 2 and say what is wrong", async () => {
    const none = await shardkit(["status"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no shard configuration: pass --config <file> or set SHARDKIT_SHARDS/);
    const bad = await shardkit(["status", "--json", ...SLOW], {
      env: { SHARDKIT_SHARDS: JSON.stringify([{ group: 0, member: 99, url: urls.a }]) },
    });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("shards[0].member");
    expect(JSON.parse(bad.stdout)).toMatchObject({ ok: false, error: { code: "INVALID_CONFIG" } });
    const missing = await shardkit(["status", "--config", "/nonexistent/shards.json"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("cannot read the configuration file /nonexistent/shards.json");
  });
});
