import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, MAIN_PORT } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { describe, expect, it } from "vitest";
import {
  atomicRouter,
  eachDatabase,
  ledger,
  orphanAfterDecision,
  preparedGids,
  S,
  stageTransfer,
  transfer,
  useAtomicWorld,
  walletOn,
} from "../test/atomic-world.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { startAtomicRecovery } from "./atomic-recover.js";
import { AtomicUnavailableError, CrossShardError } from "./errors.js";
import { openShards } from "./open/open.js";
import { rolloutSchema } from "./rollout.js";

const world = useAtomicWorld("a");
const schema = new URL("../test/schema.prisma", import.meta.url).pathname;

/** An atomic transfer between new wallets on 0/0 and 1/1 that `router` refuses with `AtomicUnavailableError`. */
async function refusedTransfer(router: ReturnType<typeof atomicRouter>) {
  const from = await walletOn(router, S.g0m0, 100n);
  const to = await walletOn(router, S.g1m1, 0n);
  const error = await router.db
    .$action((unit) => stageTransfer(unit, transfer(from, to, 5n)), { atomic: true })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(AtomicUnavailableError);
  return { error, from };
}

describe("$action(fn, { atomic: true }): two-phase commit across databases", () => {
  it("commits on every database, records the decision, and leaves nothing prepared", async () => {
    const a = await walletOn(world.router, S.g0m0, 100n);
    const b = await walletOn(world.router, S.g1m1, 0n);
    const t = transfer(a, b, 30n);
    await world.router.db.$action((unit) => stageTransfer(unit, t), { atomic: true });
    expect((await world.router.db.wallet.findUnique({ where: { id: a } }))?.balance).toBe(70n);
    expect((await world.router.db.wallet.findUnique({ where: { id: b } }))?.balance).toBe(30n);
    expect(await preparedGids(world.urls)).toEqual([]);
    const [decisions] = await eachDatabase<{ decision: string; participants: string }>(
      world.urls,
      `SELECT decision, participants FROM "AtomicDecision"`,
    );
    expect(decisions).toHaveLength(1);
    expect(decisions![0]!.decision).toBe("commit");
    expect(JSON.parse(decisions![0]!.participants).map((p: { shards: number[] }) => p.shards)).toEqual([
      [S.g0m0.bits],
      [S.g1m1.bits],
    ]);
    expect((await ledger(world.urls)).sides.get(t.id)).toEqual(["credit", "debit"]);
  });

  it("a failure on one database before the decision rolls back everywhere and rethrows it", async () => {
    const a = await walletOn(world.router, S.g0m0, 100n);
    const b = await walletOn(world.router, S.g1m1, 0n);
    const t = transfer(a, b, 30n);
    const error = await world.router.db
      .$action(
        (unit) => {
          stageTransfer(unit, t);
          unit.on(b, async () => {
            throw new RangeError("refused by a check on the second database");
          });
        },
        { atomic: true },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RangeError);
    expect((await world.router.db.wallet.findUnique({ where: { id: a } }))?.balance).toBe(100n);
    expect((await ledger(world.urls)).sides.size).toBe(0);
    expect(await preparedGids(world.urls)).toEqual([]);
  });

  it("is opt-in: without it, writes to two shards are still refused before anything is written", async () => {
    const a = await walletOn(world.router, S.g0m0, 100n);
    const b = await walletOn(world.router, S.g1m1, 0n);
    await expect(
      world.router.db.$action((unit) => stageTransfer(unit, transfer(a, b, 1n))),
    ).rejects.toBeInstanceOf(CrossShardError);
  });

  it("refuses, naming the database, when a participant's server has max_prepared_transactions = 0", async () => {
    const name = `sk_atomic_main_${process.pid}`;
    const mainUrl = await createDatabase(MAIN_PORT, name);
    try {
      await rolloutSchema({
        schema,
        targets: [{ name, adapter: new PrismaPg({ connectionString: mainUrl }) }],
        onProgress: () => {},
      });
      const mixed = atomicRouter([world.urls[0]!, world.urls[1]!, mainUrl]);
      try {
        const { error, from } = await refusedTransfer(mixed);
        expect((error as AtomicUnavailableError).code).toBe("ATOMIC_UNAVAILABLE");
        expect((error as AtomicUnavailableError).databases).toEqual([
          { database: "db2", reason: expect.stringMatching(/max_prepared_transactions = 0/) },
        ]);
        expect((await mixed.db.wallet.findUnique({ where: { id: from } }))?.balance).toBe(100n);
      } finally {
        await mixed.close();
      }
      // openShards says so when it opens such a fleet.
      const warnings: string[] = [];
      const opened = await openShards({
        schema,
        shardsJson: JSON.stringify([
          { group: 0, member: 0, url: world.urls[0]! },
          { group: 1, member: 1, url: mainUrl },
        ]),
        log: () => {},
        onWarning: (w) => warnings.push(w),
        createClient: (adapter) => new PrismaClient({ adapter }),
      });
      await opened.registry.disconnect();
      expect(warnings.filter((w) => w.includes("max_prepared_transactions"))).toEqual([
        expect.stringMatching(
          new RegExp(`with a part on \\S*${name} are refused: max_prepared_transactions = 0`),
        ),
      ]);
    } finally {
      await dropDatabase(MAIN_PORT, name);
    }
  });

  it("refuses when the deciding database has no AtomicDecision table", async () => {
    const bare = new PrismaClient({ adapter: new PrismaPg({ connectionString: world.urls[0]! }) });
    await bare.$executeRawUnsafe(`ALTER TABLE "AtomicDecision" RENAME TO "AtomicDecisionAway"`);
    const fresh = atomicRouter(world.urls); // new clients: their facts are read anew
    try {
      const { error } = await refusedTransfer(fresh);
      expect(String(error)).toMatch(/db0: .*no AtomicDecision table/);
    } finally {
      await bare.$executeRawUnsafe(`ALTER TABLE "AtomicDecisionAway" RENAME TO "AtomicDecision"`);
      await bare.$disconnect();
      await fresh.close();
    }
  });
});

describe("recovery: any router concludes what a stopped coordinator left prepared", () => {
  it("stopped after every database prepared (no decision yet): rolled back everywhere", async () => {
    const a = await walletOn(world.router, S.g0m0, 100n);
    const b = await walletOn(world.router, S.g1m1, 0n);
    const t = transfer(a, b, 30n);
    const prepared: number[] = [];
    void world.router.db.$action((unit) => stageTransfer(unit, t), {
      atomic: true,
      atomicProbe: (point, database) => {
        prepared.push(database);
        return point === "prepared" && prepared.length === 2 ? new Promise<void>(() => {}) : undefined;
      },
    });
    const other = atomicRouter(world.urls);
    try {
      await eventually(
        "both databases to prepare",
        async () => (await preparedGids(world.urls)).length === 2,
      );
      const young = await other.db.$recoverAtomic({ leaseMs: 3_600_000 });
      expect(young.transactions.map((x) => x.outcome)).toEqual(["left", "left"]);
      const report = await other.db.$recoverAtomic({ leaseMs: 0 });
      expect(report.transactions.map((x) => x.outcome).sort()).toEqual(["rolled-back", "rolled-back"]);
      expect(await preparedGids(world.urls)).toEqual([]);
      expect((await ledger(world.urls)).sides.size).toBe(0);
      expect((await other.db.wallet.findUnique({ where: { id: a } }))?.balance).toBe(100n);
    } finally {
      await other.close();
    }
  });

  it("stopped after the decision: the other database is committed by recovery", async () => {
    const { b, t } = await orphanAfterDecision(world, S.g1m1);
    const other = atomicRouter(world.urls);
    try {
      const report = await other.db.$recoverAtomic({ leaseMs: 0 });
      expect(report.transactions).toMatchObject([
        { database: "db2", decision: "commit", outcome: "committed" },
      ]);
      expect((await ledger(world.urls)).sides.get(t.id)).toEqual(["credit", "debit"]);
      expect((await other.db.wallet.findUnique({ where: { id: b } }))?.balance).toBe(30n);
      expect(await preparedGids(world.urls)).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it("a router's periodic recovery (startAtomicRecovery) concludes an orphan by itself; dryRun only lists it", async () => {
    const { t } = await orphanAfterDecision(world, S.g1m1);
    const other = atomicRouter(world.urls);
    const listed = await other.db.$recoverAtomic({ leaseMs: 0, dryRun: true });
    expect(listed.transactions).toMatchObject([
      { database: "db2", decision: "commit", outcome: "left", participants: 2 },
    ]);
    expect(listed.transactions[0]!.shards.map((s) => s.key)).toEqual([S.g1m1.key]);
    const recovery = startAtomicRecovery(() => other.db.$recoverAtomic({ leaseMs: 0 }), { everyMs: 20 });
    try {
      await eventually(
        "periodic recovery to commit the orphan",
        async () => (await preparedGids(world.urls)).length === 0,
      );
      expect((await ledger(world.urls)).sides.get(t.id)).toEqual(["credit", "debit"]);
    } finally {
      await recovery.stop();
      await other.close();
    }
  });

  it("two routers recovering the same orphans at once: one outcome, each transaction ended once", async () => {
    const { a, t: decided } = await orphanAfterDecision(world, S.g1m1);
    const c = await walletOn(world.router, S.g0m2, 0n);
    const undecided = transfer(a, c, 20n);
    let seen = 0;
    void world.router.db.$action((unit) => stageTransfer(unit, undecided), {
      atomic: true,
      atomicProbe: (point) =>
        point === "prepared" && ++seen === 2 ? new Promise<void>(() => {}) : undefined,
    });
    await eventually(
      "three prepared transactions",
      async () => (await preparedGids(world.urls)).length === 3,
    );
    const [one, two] = [atomicRouter(world.urls), atomicRouter(world.urls)];
    try {
      const reports = await Promise.all([
        one.db.$recoverAtomic({ leaseMs: 0 }),
        two.db.$recoverAtomic({ leaseMs: 0 }),
      ]);
      const outcomes = reports.flatMap((r) => r.transactions.filter((x) => x.outcome !== "left"));
      // Each of the three prepared transactions was ended by exactly one router.
      expect(outcomes.map((x) => x.gid).sort()).toEqual([...new Set(outcomes.map((x) => x.gid))].sort());
      expect(await preparedGids(world.urls)).toEqual([]);
      const { sides, total } = await ledger(world.urls);
      expect(sides.get(decided.id)).toEqual(["credit", "debit"]);
      expect(sides.get(undecided.id)).toBeUndefined();
      expect(total).toBe(100n);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
