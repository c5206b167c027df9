import { patient, pgBouncerPath, startPgBouncer } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAULT_SERVER, useFaultWorld } from "../test/atomic-fault-world.js";
import {
  type AtomicRouter,
  atomicRouter,
  ledger,
  orphanAfterDecision,
  preparedGids,
  recoverAll,
  S,
  stageTransfer,
  stopAt,
  transfer,
  walletOn,
} from "../test/atomic-world.js";

// Atomic actions through a connection pooler in transaction mode (a real PgBouncer of this file's
// own in front of y's server): a prepared transaction belongs to no session once prepared, so
// PREPARE TRANSACTION on one server session and COMMIT/ROLLBACK PREPARED on another is how
// two-phase commit works anyway, and the pieces atomic actions use are all within a transaction
// (SET LOCAL, the decision row). So they work through it, and a router reaching y through the
// pooler and one reaching it directly name y alike (its server's identity, not the pooler's).

const world = useFaultWorld("pooler");

describe.skipIf(!pgBouncerPath())(
  "atomic actions through PgBouncer in transaction mode",
  { timeout: patient(60_000) },
  () => {
    let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
    let pooled: AtomicRouter;
    beforeAll(async () => {
      bouncer = await startPgBouncer({ targetPort: FAULT_SERVER.port, poolSize: 2 });
      const y = new URL(world.urls[1]!).pathname.slice(1);
      pooled = atomicRouter([world.urls[0]!, bouncer.url(y), world.urls[2]!]);
    }, patient(60_000));
    afterAll(async () => {
      await pooled?.close();
      await bouncer?.stop();
    }, patient(60_000));

    it("transfers through the pooler commit everywhere, more at once than its server connections", async () => {
      const pairs = [
        [S.g0m0, S.g0m2],
        [S.g0m2, S.g1m1],
        [S.g1m1, S.g0m2],
        [S.g0m2, S.g0m1],
      ];
      const transfers = await Promise.all(
        [...pairs, ...pairs].map(async ([from, to], i) =>
          transfer(await walletOn(pooled, from!, 100n), await walletOn(pooled, to!, 0n), BigInt(i + 1)),
        ),
      );
      // Eight at once queue for the pooler's two server connections: each waits its turn (on a busy
      // host, longer than Prisma's default 2 s to begin a transaction).
      const patience = { maxWait: patient(20_000), timeout: patient(20_000) };
      await Promise.all(
        transfers.map((t) =>
          pooled.db.$action((unit) => stageTransfer(unit, t), { atomic: true, ...patience }),
        ),
      );
      const { sides, total } = await ledger(world.urls);
      for (const t of transfers) expect(sides.get(t.id)).toEqual(["credit", "debit"]);
      expect(total).toBe(800n);
      expect(await preparedGids(world.urls)).toEqual([]);
    });

    it(
      "transfers at once between the same wallets through the pooler: each commits or fails (none hangs), all or nothing",
      async () => {
        // Each waits for the rows the one before it holds prepared; its commit needs one of the
        // pooler's two server connections, which waiters hold until their lock_timeout.
        const x = await walletOn(pooled, S.g0m0, 100n);
        const y = await walletOn(pooled, S.g0m2, 100n);
        const z = await walletOn(pooled, S.g1m1, 100n);
        const pairs: [string, string][] = [
          [x, y],
          [y, z],
          [z, y],
          [y, x],
        ];
        const transfers = [...pairs, ...pairs].map(([from, to], i) => transfer(from, to, BigInt(i + 1)));
        const outcomes = await Promise.allSettled(
          transfers.map((t) => pooled.db.$action((unit) => stageTransfer(unit, t), { atomic: true })),
        );
        await recoverAll(world.router, world.urls);
        const { sides, total } = await ledger(world.urls);
        transfers.forEach((t, i) => {
          if (outcomes[i]!.status === "fulfilled") expect(sides.get(t.id)).toEqual(["credit", "debit"]);
          else expect([[], ["credit", "debit"]]).toContainEqual(sides.get(t.id) ?? []);
        });
        expect(total).toBe(300n);
      },
      patient(120_000),
    );

    it("a coordinator through the pooler stopped after every database prepared: a direct router's recovery rolls it back", async () => {
      const y = await walletOn(pooled, S.g0m2, 100n); // y decides (through the pooler)
      const z = await walletOn(pooled, S.g1m1, 0n);
      const t = transfer(y, z, 30n);
      void pooled.db.$action((unit) => stageTransfer(unit, t), {
        atomic: true,
        atomicProbe: stopAt("prepared", 2),
      });
      await eventually(
        "both databases to prepare",
        async () => (await preparedGids(world.urls)).length === 2,
      );
      // The direct router finds y's decision by the same identity the pooled coordinator wrote.
      const report = await world.router.db.$recoverAtomic({ leaseMs: 0 });
      expect(report.unanswered).toEqual([]);
      expect(report.transactions.map((x) => x.outcome).sort()).toEqual(["rolled-back", "rolled-back"]);
      const { sides, total } = await ledger(world.urls);
      expect(sides.get(t.id)).toBeUndefined();
      expect(total).toBe(100n);
      expect(await preparedGids(world.urls)).toEqual([]);
    });

    it("a direct coordinator stopped after the decision: recovery through the pooler commits y's part", async () => {
      const { b: y, t } = await orphanAfterDecision(world, S.g0m2); // x (0/0) decides, y is left prepared
      const report = await pooled.db.$recoverAtomic({ leaseMs: 0 });
      expect(report.transactions).toMatchObject([
        { database: "db1", decision: "commit", outcome: "committed" },
      ]);
      await recoverAll(world.router, world.urls);
      const { sides, total } = await ledger(world.urls);
      expect(sides.get(t.id)).toEqual(["credit", "debit"]);
      expect(total).toBe(100n);
      expect((await pooled.db.wallet.findUnique({ where: { id: y } }))?.balance).toBe(30n);
    });
  },
);
