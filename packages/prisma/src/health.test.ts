import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient, withClusterFrozen } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, describe, expect, inject, it, vi } from "vitest";
import { loggedClient, makeWorld, S } from "../test/world.js";
import { withDeadline, withShardDeadline } from "./deadline.js";
import { isShardkitError, ShardTimeoutError } from "./errors.js";
import { probeDatabase, shardHealth } from "./health.js";
import { createShardRegistry } from "./registry.js";
import { isShardUnavailable } from "./unavailable.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const world = makeWorld();
afterAll(() => world.close());

describe("shardHealth", () => {
  it("every shard up, with its database and the probe's round trip", async () => {
    // A timeout a busy host meets (the default, 1 s, is a readiness probe's: slow past it is `slow`).
    const report = await shardHealth(world.registry, { timeoutMs: patient(30_000) });
    expect(report.status).toBe("ok");
    expect(report.shards.map((s) => s.shard)).toEqual(["0/0", "0/1", "0/2", "1/0", "1/1", "1/2"]);
    expect(new Set(report.shards.map((s) => s.database)).size).toBe(3);
    for (const s of report.shards) expect(s.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it(
    "a frozen server: its shards are slow (not down) after the timeout, the others up; asking again does not pile up probes",
    async () => {
      await withClusterFrozen(SECOND.cluster, async () => {
        // The servers that are up answer within it on a busy machine too.
        const timeoutMs = patient(300);
        for (let round = 0; round < 3; round++) {
          const report = await shardHealth(world.registry, { timeoutMs });
          expect(report.status).toBe("degraded");
          expect(report.shards.filter((s) => s.state === "slow").map((s) => s.shard)).toEqual(["1/1", "1/2"]);
          expect(report.shards.find((s) => s.shard === "1/1")!.error).toBe(
            `did not answer within ${timeoutMs} ms`,
          );
          // The database's own entry says so too; asked for its connections, it is slow the same way.
          expect(report.databases.map((d) => d.state)).toEqual(["up", "up", "slow"]);
          const counted = await probeDatabase(world.registry.databases[2]!, { timeoutMs, connections: true });
          expect(counted).toMatchObject({ state: "slow", error: `did not answer within ${timeoutMs} ms` });
        }
      });
      // Thawed: the one probe left running answers, and the shards are up again.
      const report = await shardHealth(world.registry, { timeoutMs: patient(30_000) });
      expect(report.status).toBe("ok");
    },
    patient(60_000),
  );

  it("refuses a timeout that is not a positive number", async () => {
    await expect(shardHealth(world.registry, { timeoutMs: 0 })).rejects.toThrow(/timeoutMs/);
    await expect(probeDatabase(world.registry.databases[0]!, { timeoutMs: -1 })).rejects.toThrow(
      /probeDatabase: timeoutMs/,
    );
  });

  it("counts each database's connections when asked: total, active, idle in a transaction, the server's and its maximum", async () => {
    // A database of this test's own: nothing else connects to it.
    const name = `sk_prisma_health_conns_${process.pid}`;
    const url = await createDatabase(MAIN_PORT, name);
    const client = loggedClient("a", url, []);
    const registry = createShardRegistry({
      shards: [0, 1, 2].map((member) => ({ shard: ShardIdentifier.of(5, member), client })),
    });
    const sessions = [0, 1, 2].map(() => new pg.Client({ connectionString: url }));
    try {
      await Promise.all(sessions.map((s) => s.connect()));
      const [holder, waiter] = sessions;
      // One idle in an open transaction holding a lock, one running a statement waiting for it, one idle.
      await holder!.query("BEGIN");
      await holder!.query("SELECT pg_advisory_xact_lock(4242)");
      const waiting = waiter!.query("SELECT pg_advisory_xact_lock(4242)");
      await eventually("the waiter is running its statement", async () => {
        const { rows } = await holder!.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        return rows[0].n === 1;
      });
      const report = await shardHealth(registry, { timeoutMs: patient(10_000), connections: true });
      expect(report.status).toBe("ok");
      expect(report.shards.map((s) => s.shard)).toEqual(["5/0", "5/1", "5/2"]);
      expect(report.databases).toHaveLength(1);
      const [database] = report.databases;
      const { rows } = await holder!.query(
        "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int AS max",
      );
      // The three sessions and the probe's own (Prisma's pool: one connection, running the probe).
      expect(database).toMatchObject({
        database: registry.databases[0]!.name,
        state: "up",
        connections: { total: 4, active: 2, idleInTransaction: 1, max: rows[0].max },
      });
      expect(database!.connections!.server).toBeGreaterThanOrEqual(4);
      expect(database!.connections!.server).toBeLessThanOrEqual(rows[0].max + 3);
      // Without asking, a plain probe: no counts.
      const plain = await probeDatabase(registry.databases[0]!, { timeoutMs: patient(10_000) });
      expect(plain.state).toBe("up");
      expect(plain.connections).toBeUndefined();
      await holder!.query("COMMIT");
      await waiting;
      await waiter!.query("SELECT 1");
      const after = await probeDatabase(registry.databases[0]!, {
        timeoutMs: patient(10_000),
        connections: true,
      });
      expect(after.connections).toMatchObject({ total: 4, active: 1, idleInTransaction: 0 });
    } finally {
      await Promise.all(sessions.map((s) => s.end().catch(() => {})));
      await client.$disconnect();
      await dropDatabase(MAIN_PORT, name);
    }
  });

  it("a database that refuses the probe is down with the error's summary, the others up", async () => {
    const url = `postgresql://postgres@127.0.0.1:${MAIN_PORT}/sk_prisma_health_missing_${process.pid}`;
    const missing = loggedClient("a", url, []);
    const registry = createShardRegistry({
      shards: [
        { shard: ShardIdentifier.of(6, 0), client: world.clients.a },
        { shard: ShardIdentifier.of(6, 1), client: missing },
      ],
    });
    try {
      const report = await shardHealth(registry, { timeoutMs: patient(10_000), connections: true });
      expect(report.status).toBe("degraded");
      expect(report.databases.map((d) => d.state)).toEqual(["up", "down"]);
      expect(report.databases[0]!.connections!.total).toBeGreaterThanOrEqual(1);
      expect(report.databases[1]!.error).toMatch(/does not exist/);
      expect(report.databases[1]!.connections).toBeUndefined();
      expect(report.shards.find((s) => s.shard === "6/1")).toMatchObject({ state: "down" });
    } finally {
      await missing.$disconnect();
    }
  });
});

describe("withShardDeadline", () => {
  it(
    "a call to a frozen database fails with SHARD_TIMEOUT naming the shard, which counts as unavailable",
    async () => {
      await withClusterFrozen(SECOND.cluster, async () => {
        const error = await withShardDeadline(S.g1m1, 300, () =>
          world.db.customer.findUnique({ where: { id: ShardedId.generate("Customer", S.g1m1) } }),
        ).catch((e: unknown) => e);
        expect(isShardkitError(error, "SHARD_TIMEOUT")).toBe(true);
        expect((error as Error).message).toBe("shard 1/1 did not answer within 300 ms");
        expect(isShardUnavailable(error)).toBe(true);
      });
    },
    patient(60_000),
  );

  it("a call that answers in time returns its value; its own error passes through unchanged", async () => {
    expect(await withShardDeadline(S.g0m0, 5000, async () => 42)).toBe(42);
    const mine = new Error("mine");
    await expect(withShardDeadline(S.g0m0, 5000, () => Promise.reject(mine))).rejects.toBe(mine);
  });
});

describe("withDeadline", () => {
  it("the error late() makes when run() has not settled in time; run()'s own answer otherwise", async () => {
    const late = new ShardTimeoutError(S.g0m0, 20);
    await expect(
      withDeadline(
        20,
        () => late,
        () => new Promise(() => {}),
      ),
    ).rejects.toBe(late);
    expect(
      await withDeadline(
        5000,
        () => late,
        async () => 7,
      ),
    ).toBe(7);
  });

  it("a timeout past what a timer holds (Infinity, 2^40 ms) sets no deadline, instead of one that fires at once", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const late = new ShardTimeoutError(S.g0m0, 1);
      for (const ms of [Number.POSITIVE_INFINITY, 2 ** 40]) {
        let answer!: (value: number) => void;
        const pending = withDeadline(
          ms,
          () => late,
          () => new Promise<number>((r) => (answer = r)),
        );
        await vi.advanceTimersByTimeAsync(1000); // a timer set past its reach would have fired by now
        answer(9);
        expect(await pending).toBe(9);
      }
    } finally {
      vi.useRealTimers();
    }
  });
});
