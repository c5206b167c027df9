import { patient } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { S } from "../test/layout.js";
import { router } from "../test/world.js";
import { MoveTimeoutError } from "./errors.js";
import { bounded, raw, unbounded } from "./raw.js";

// `bounded` on a real database (a): a statement that outlasts the deadline fails the work, and a
// transaction given up is rolled back even when its statement answers later.
const r = router();
const a = r.databases.a;
const db = raw(a);
const TABLE = `"RawDeadlineProbe_${process.pid}"`;
const late = () => new MoveTimeoutError(S.g0m1, "the probe", 300);
const within = (ms: number) => ({ at: performance.now() + ms, late });

beforeAll(() => db.$executeRawUnsafe(`CREATE TABLE ${TABLE} (n int)`));
afterAll(async () => {
  await db.$executeRawUnsafe(`DROP TABLE IF EXISTS ${TABLE}`);
  await r.close();
});

/** Waits until none of this test's sleeps runs on a any more (the server's own view). */
async function sleepsOver() {
  await vi.waitFor(
    async () => {
      const [row] = await db.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE state = 'active' AND query LIKE '%pg_sleep(1.5)%' AND pid <> pg_backend_pid()`,
      );
      expect(row!.n).toBe(0);
    },
    { timeout: patient(60_000), interval: 50 },
  );
}

describe("bounded", () => {
  it("a statement that has not answered by the deadline fails with the deadline's error; unbounded, the same wait is not cut short", async () => {
    const error = await bounded(within(300), () =>
      raw(a).$queryRawUnsafe("SELECT 1 AS one FROM pg_sleep(1.5)"),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MoveTimeoutError);
    expect((error as Error).message).toBe("shard 0/1: the probe did not finish within 300 ms");
    const slept = await bounded(within(300), () =>
      unbounded(() => raw(a).$queryRawUnsafe("SELECT 1 AS one FROM pg_sleep(0.6)")),
    );
    expect(slept).toEqual([{ one: 1 }]);
    await sleepsOver();
  });

  it("a transaction given up is rolled back, though its statement answers later: neither the write before the late statement nor the one after it is committed", async () => {
    let after = false;
    const error = await bounded(within(300), () =>
      raw(a).$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe(`INSERT INTO ${TABLE} VALUES (1)`);
          await tx.$queryRawUnsafe("SELECT 1 AS one FROM pg_sleep(1.5)");
          after = true;
          await tx.$executeRawUnsafe(`INSERT INTO ${TABLE} VALUES (2)`);
        },
        { timeout: patient(30_000) },
      ),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MoveTimeoutError);
    await sleepsOver();
    await vi.waitFor(() => expect(after).toBe(true), { timeout: patient(60_000) }); // the callback went on
    expect(await db.$queryRawUnsafe(`SELECT n FROM ${TABLE}`)).toEqual([]);
  });

  it("a transaction whose last statement answers late is not committed either", async () => {
    const error = await bounded(within(300), () =>
      raw(a).$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe(`INSERT INTO ${TABLE} VALUES (3)`);
          await tx.$queryRawUnsafe("SELECT 1 AS one FROM pg_sleep(1.5)");
        },
        { timeout: patient(30_000) },
      ),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MoveTimeoutError);
    await sleepsOver();
    // The callback's end (after the sleep) threw: Prisma rolled the transaction back.
    await vi.waitFor(
      async () => {
        const [row] = await db.$queryRawUnsafe<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`,
        );
        expect(row!.n).toBe(0);
      },
      { timeout: patient(60_000), interval: 50 },
    );
    expect(await db.$queryRawUnsafe(`SELECT n FROM ${TABLE}`)).toEqual([]);
  });
});
