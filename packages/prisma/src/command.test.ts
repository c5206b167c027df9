import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { patient, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { makeWorld, S } from "../test/world.js";
import { CommandUnavailableError, IdempotencyConflictError } from "./errors.js";
import { shardRouting } from "./extension.js";
import { createShardRegistry } from "./registry.js";
import { isShardUnavailable } from "./unavailable.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

// db.$command on real PostgreSQL: a command decided once per idempotency key, its refusals
// recorded, and a shard that does not answer told apart from a command that was not applied.
const world = makeWorld();
const { db } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const customer = (shard = S.g0m1) => ({ id: ShardedId.generate("Customer", shard), name: "c", region: "x" });

/** A refusal the command decides, recorded like a result. */
class Refused extends Error {}
const refusal = (error: unknown) => (error instanceof Refused ? { reason: error.message } : undefined);

describe("$command", () => {
  it("runs once per key: a retry answers the recorded result, another request with the key is refused", async () => {
    const c = customer();
    await db.customer.create({ data: c });
    let runs = 0;
    const rename = (key: string, name: string) =>
      db.$command(c.id, { kind: "rename", key, request: { id: c.id, name } }, async (tx) => {
        runs++;
        return (await tx.customer.update({ where: { id: c.id }, data: { name } })).name;
      });
    expect(await rename("k1", "first")).toEqual({ result: "first", replayed: false });
    expect(await rename("k1", "first")).toEqual({ result: "first", replayed: true });
    await expect(rename("k1", "second")).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(runs).toBe(1);
    expect((await db.customer.findUnique({ where: { id: c.id } }))?.name).toBe("first");
  });

  it("records a refusal, rolls back what the command wrote before it, and answers it again", async () => {
    const c = customer(S.g1m0);
    await db.customer.create({ data: c });
    let runs = 0;
    const withdraw = () =>
      db.$command(c.id, { kind: "withdraw", key: "w", request: { id: c.id }, refusal }, async (tx) => {
        runs++;
        await tx.customer.update({ where: { id: c.id }, data: { name: "spent" } });
        throw new Refused("insufficient funds");
      });
    expect(await withdraw()).toEqual({ refusal: { reason: "insufficient funds" }, replayed: false });
    expect(await withdraw()).toEqual({ refusal: { reason: "insufficient funds" }, replayed: true });
    expect(runs).toBe(1);
    expect((await db.customer.findUnique({ where: { id: c.id } }))?.name).toBe("c");
  });

  it("past its deadline fails with outcome unknown; the late commit is what a retry with the key answers", async () => {
    const c = customer();
    await db.customer.create({ data: c });
    let runs = 0;
    const slowRename = (timeoutMs?: number) =>
      db.$command(
        c.id,
        { kind: "rename", key: "slow", request: { id: c.id }, timeoutMs, timeout: patient(60_000) },
        async (tx) => {
          runs++;
          await tx.$executeRawUnsafe("SELECT pg_sleep(1)");
          return (await tx.customer.update({ where: { id: c.id }, data: { name: "late" } })).name;
        },
      );
    const late = await slowRename(50).catch((error: unknown) => error);
    expect(late).toBeInstanceOf(CommandUnavailableError);
    expect(late).toMatchObject({ shard: S.g0m1, outcome: "unknown", code: "COMMAND_UNAVAILABLE" });
    expect((late as Error).message).toMatch(
      /^shard 0\/1 did not answer within 50 ms: the command may have been applied/,
    );
    expect(isShardUnavailable(late)).toBe(true);
    // Once the first holds its key (its transaction is in its sleep, the key inserted before), the
    // retry waits on the key's row until the first commits, then answers what it recorded.
    await eventually("the first command sleeps in its transaction, or has committed", async () => {
      const [row] = await world.clients.a.$queryRawUnsafe<{ n: number }[]>(
        `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'SELECT pg_sleep(1)' AND state = 'active')
              + (SELECT count(*) FROM "IdempotencyKey" WHERE key = 'slow') AS n`,
      );
      return Number(row!.n) > 0;
    });
    expect(await slowRename()).toEqual({ result: "late", replayed: true });
    expect(runs).toBe(1);
  });

  it("an attempt that had not begun when the deadline passed never runs: a retry with the key runs the command", async () => {
    // A client with one connection, held by another transaction: the command waits for it.
    const single = new PrismaClient({
      adapter: new PrismaPg({ connectionString: inject("shardUrls").a, max: 1 }),
    });
    const registry = createShardRegistry({ shards: [{ shard: S.g0m1, client: single }] });
    const routed = single.$extends(shardRouting({ registry, models: {} }));
    const c = customer();
    await db.customer.create({ data: c });
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = false;
    const holder = single.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe("SELECT 1");
        holding = true;
        await released;
      },
      { timeout: patient(120_000) },
    );
    await eventually("the other transaction holds the only connection", () => holding);
    let runs = 0;
    const rename = (timeoutMs?: number) =>
      routed.$command(
        c.id,
        { kind: "rename", key: "queued", request: { id: c.id }, timeoutMs, maxWait: 120_000 },
        async (tx) => {
          runs++;
          return (await tx.customer.update({ where: { id: c.id }, data: { name: "renamed" } })).name;
        },
      );
    const late = await rename(100).catch((error: unknown) => error);
    expect(late).toMatchObject({ code: "COMMAND_UNAVAILABLE", outcome: "unknown" });
    release();
    await holder;
    // The abandoned attempt gets the connection first and rolls back before running; the retry runs.
    expect(await rename()).toEqual({ result: "renamed", replayed: false });
    expect(runs).toBe(1);
    await single.$disconnect();
  });

  it("a command that lost a race and was rolled back says it was not applied", async () => {
    const c = customer();
    await db.customer.create({ data: c });
    // Two serializable commands each read the row, then both write it: one must fail (40001).
    let read = 0;
    let bothRead: () => void = () => {};
    const barrier = new Promise<void>((resolve) => {
      bothRead = resolve;
    });
    const rename = (key: string) =>
      db.$command(
        c.id,
        { kind: "rename", key, request: { key }, isolationLevel: "Serializable" },
        async (tx) => {
          await tx.customer.findUnique({ where: { id: c.id } });
          if (++read === 2) bothRead();
          await barrier;
          return (await tx.customer.update({ where: { id: c.id }, data: { name: key } })).name;
        },
      );
    const outcomes = await Promise.allSettled([rename("a"), rename("b")]);
    const lost = outcomes.filter((o) => o.status === "rejected").map((o) => o.reason);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(CommandUnavailableError);
    expect(lost[0]).toMatchObject({ outcome: "not-applied" });
    expect((lost[0] as Error).message).toMatch(/the command was not applied; retry later$/);
    const won = outcomes.find((o) => o.status === "fulfilled") as PromiseFulfilledResult<{ result: string }>;
    expect((await db.customer.findUnique({ where: { id: c.id } }))?.name).toBe(won.value.result);
  });

  it("with its database's server stopped, fails naming the shard; the other shards' commands run", async () => {
    const down = customer(S.g1m1); // on c, the second server
    const up = customer(S.g0m0);
    await db.customer.create({ data: up });
    await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
      const failed = await db
        .$command(down.id, { kind: "create", key: "d", request: down }, (tx) =>
          tx.customer.create({ data: down }),
        )
        .catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(CommandUnavailableError);
      expect(failed).toMatchObject({ shard: S.g1m1, outcome: "unknown" });
      expect(
        await db.$command(
          up.id,
          { kind: "rename", key: "u", request: up },
          async (tx) => (await tx.customer.update({ where: { id: up.id }, data: { name: "served" } })).name,
        ),
      ).toEqual({ result: "served", replayed: false });
    });
  });
});
