import { ShardedId } from "@shardkit/id";
import { patient, withClusterFrozen } from "@shardkit/test-db";
import { afterAll, describe, expect, it, vi } from "vitest";
import { SECOND } from "../test/global-setup.js";
import { makeWorld, S } from "../test/world.js";
import { withDeadline, withShardDeadline } from "./deadline.js";
import { isShardkitError, ShardTimeoutError } from "./errors.js";
import { shardHealth } from "./health.js";
import { isShardUnavailable } from "./unavailable.js";

const world = makeWorld();
afterAll(() => world.close());

describe("shardHealth", () => {
  it("every shard up, with its database and the probe's round trip", async () => {
    // A timeout a busy host meets (the default, 1 s, is a readiness probe's: slow past it is `slow`).
    const report = await shardHealth(world.registry, { timeoutMs: 30_000 });
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
        }
      });
      // Thawed: the one probe left running answers, and the shards are up again.
      const report = await shardHealth(world.registry, { timeoutMs: 30_000 });
      expect(report.status).toBe("ok");
    },
    patient(60_000),
  );

  it("refuses a timeout that is not a positive number", async () => {
    await expect(shardHealth(world.registry, { timeoutMs: 0 })).rejects.toThrow(/timeoutMs/);
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
