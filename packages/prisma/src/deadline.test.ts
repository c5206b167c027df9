import { ShardedId, type ShardIdentifier, shardHash } from "@shardkit/id";
import { patient, withClusterFrozen } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { makeWorld, S } from "../test/world.js";
import { orAfter, withDeadline, withShardDeadline } from "./deadline.js";
import { RoutingOptionsError, ShardTimeoutError } from "./errors.js";
import { shardRouting } from "./extension.js";
import { isShardUnavailable } from "./unavailable.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

/** The shard the frozen hash places `value` on among `shards`. */
const hashedTo = (value: string, shards: readonly ShardIdentifier[]) => shardHash(shards)(value);

// A server that freezes (SIGSTOP: connections open, nothing answers) fails its own calls after the
// routed client's `timeoutMs`; the other databases go on answering. Database c (the second server)
// holds 1/1 and 1/2.
const world = makeWorld();
const { registry, clients } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const SHARDS = [S.g0m0, S.g0m1, S.g0m2, S.g1m0, S.g1m1, S.g1m2];
/** The routed client's timeout: the databases that are up must answer within it on a busy machine too. */
const TIMEOUT_MS = patient(400);
const db = clients.a.$extends(
  shardRouting({
    registry,
    timeoutMs: TIMEOUT_MS,
    keyless: { mode: "scatter", policy: "partial" },
    models: { Customer: { unique: { email: true }, place: () => S.g0m0 } },
  }),
);
const customer = (shard = S.g1m1, email?: string) => ({
  id: ShardedId.generate("Customer", shard),
  name: "c",
  region: "x",
  ...(email ? { email } : {}),
});
/** An email whose claim lives on database c. */
const emailClaimedOnC = () => {
  for (let i = 0; ; i++) {
    const email = `frozen-${i}@example.com`;
    const shard = hashedTo(`Customer.email\u0000${email}`, SHARDS);
    if (registry.databaseOf(shard).index === 2) return email;
  }
};

describe("withDeadline and orAfter: the one deadline", () => {
  const never = () => new Promise<never>(() => {});

  it("a run that does not answer in time: withDeadline rejects with late()'s error and aborts the run's signal with it", async () => {
    let seen: AbortSignal | undefined;
    const late = new Error("late");
    await expect(
      withDeadline(
        5,
        () => late,
        (signal) => {
          seen = signal;
          return never();
        },
      ),
    ).rejects.toBe(late);
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBe(late);
  });

  it("a run that answers: its value, its failure as it is, and its signal never aborted", async () => {
    let seen: AbortSignal | undefined;
    const value = await withDeadline(
      60_000,
      () => new Error("late"),
      async (signal) => {
        seen = signal;
        return 7;
      },
    );
    expect(value).toBe(7);
    expect(seen?.aborted).toBe(false);
    const failure = new Error("refused");
    await expect(
      withDeadline(
        60_000,
        () => new Error("late"),
        () => Promise.reject(failure),
      ),
    ).rejects.toBe(failure);
    // No deadline at all past what a timer holds.
    expect(
      await withDeadline(
        Number.POSITIVE_INFINITY,
        () => new Error("late"),
        async () => 8,
      ),
    ).toBe(8);
  });

  it("orAfter: the fallback when late, the value when in time, a failure thrown as it is", async () => {
    expect(await orAfter(5, "gave up", never)).toBe("gave up");
    expect(await orAfter(60_000, "gave up", async () => "answer")).toBe("answer");
    const failure = new Error("refused");
    await expect(orAfter(60_000, "gave up", () => Promise.reject(failure))).rejects.toBe(failure);
  });
});

describe("statements bounded by timeoutMs", () => {
  it("refuses a timeoutMs that is not a positive number", () => {
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => shardRouting({ registry, timeoutMs })).toThrow(RoutingOptionsError);
    }
  });

  it(
    "a frozen server fails the statements shardkit sends for a call (scatter legs, claims) and its transactions; the others answer",
    async () => {
      const onC = customer();
      await db.customer.create({ data: onC });
      const email = emailClaimedOnC();
      await withClusterFrozen(SECOND.cluster, async () => {
        // A keyless read with policy "partial" answers from the rest and names what is missing.
        let missing: string[] = [];
        const onA = customer(S.g0m0);
        await db.customer.create({ data: onA });
        const all = await db
          .$scatter({ policy: "partial", onReport: (r) => (missing = r.missingShards.map((s) => s.key)) })
          .customer.findMany({ orderBy: { id: "asc" } });
        expect(all.map((c) => c.id)).toEqual([onA.id]);
        expect(missing.sort()).toEqual(["1/1", "1/2"]);
        // With policy "fail" it fails, as unavailable, naming the database that did not answer.
        const failed = await db
          .$scatter({ policy: "fail" })
          .customer.findMany({})
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        expect(isShardUnavailable(failed), String(failed)).toBe(true);
        const causes = ((failed as Error).cause as AggregateError).errors as Error[];
        expect(causes.map((e) => e.message)).toEqual([
          `database database #2 (shards 1/1, 1/2) did not answer within ${TIMEOUT_MS} ms`,
        ]);

        // A shard transaction on the frozen server fails (within its maxWait) instead of hanging.
        const tx = await db
          .$transactionOn(S.g1m2, (t) => t.customer.count(), { maxWait: 300, timeout: 300 })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        expect(isShardUnavailable(tx), String(tx)).toBe(true);

        // A write whose unique value's claim lives on the frozen server: unavailable, not a hang.
        const claimed = await db.customer.create({ data: customer(S.g0m0, email) }).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(claimed).toBeInstanceOf(ShardTimeoutError);
        expect(isShardUnavailable(claimed)).toBe(true);

        // The caller's own point call is bounded where the caller says: withShardDeadline.
        const read = await withShardDeadline(S.g1m1, 300, () =>
          db.customer.findUnique({ where: { id: onC.id } }),
        ).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(read).toBeInstanceOf(ShardTimeoutError);
      });
      // Thawed, the same calls answer.
      expect(await db.customer.findUnique({ where: { id: onC.id } })).toMatchObject({ id: onC.id });
      await db.customer.create({ data: customer(S.g0m0, email) });
      expect(await db.customer.count()).toBe(3);
    },
    patient(120_000),
  );
});
