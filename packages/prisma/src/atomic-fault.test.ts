import { patient, withClusterFrozen, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { describe, expect, it } from "vitest";
import { FAULT_SERVER, faultTimeoutMs, recoverInChild, useFaultWorld } from "../test/atomic-fault-world.js";
import {
  atomicRouter,
  eachDatabase,
  ledger,
  preparedGids,
  S,
  stageTransfer,
  transfer,
  walletOn,
} from "../test/atomic-world.js";
import { AtomicInDoubtError, DatabaseTimeoutError, DatabaseUnavailableError } from "./errors.js";
import { isShardUnavailable } from "./unavailable.js";

// A participant's server stopped or frozen in the middle of an atomic action (y, alone on a server
// of this file's own): the action commits, fails naming the database, or reports itself in doubt;
// never hangs. Recovery by another process, once the server is back, ends every action all or
// nothing; every acknowledged transfer is counted once on every shard and the money is all there.

const world = useFaultWorld("fault");

/** A gate a coordinator waits at: `reached` once it got there, `open()` lets it go on. */
function gate() {
  let arrive!: () => void;
  let open!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  const opened = new Promise<void>((resolve) => (open = resolve));
  const wait = () => {
    arrive();
    return opened;
  };
  return { reached, open, wait };
}

/** An atomic transfer whose coordinator waits, once both databases prepared, until the gate opens. */
function pausedAfterPrepare(t: ReturnType<typeof transfer>) {
  const g = gate();
  let prepared = 0;
  const outcome = world.router.db
    .$action((unit) => stageTransfer(unit, t), {
      atomic: true,
      atomicProbe: (point) => (point === "prepared" && ++prepared === 2 ? g.wait() : undefined),
    })
    .then(
      () => "committed" as const,
      (error: unknown) => error,
    );
  return { ...g, outcome };
}

const balances = (ids: string[]) =>
  Promise.all(ids.map(async (id) => (await world.router.db.wallet.findUnique({ where: { id } }))!.balance));

describe("a participant's server stopped between PREPARE and COMMIT PREPARED", () => {
  it(
    "y a participant: the action commits; y's part is committed by recovery in another process once y is back",
    async () => {
      const a = await walletOn(world.router, S.g0m0, 100n); // x, the decider
      const b = await walletOn(world.router, S.g0m2, 0n); // y
      const c = await walletOn(world.router, S.g1m1, 0n); // z
      const before = transfer(a, c, 10n);
      await world.router.db.$action((unit) => stageTransfer(unit, before), { atomic: true });
      const t = transfer(a, b, 30n);
      const paused = pausedAfterPrepare(t);
      await paused.reached;
      const during = transfer(a, c, 5n);
      const { outcome, refused } = await withClusterStopped(
        FAULT_SERVER.cluster,
        FAULT_SERVER.port,
        async () => {
          paused.open();
          const outcome = await paused.outcome;
          // While y is down, an action without a part on it commits; one with a part on it fails.
          await world.router.db.$action((unit) => stageTransfer(unit, during), { atomic: true });
          const refused = await world.router.db
            .$action((unit) => stageTransfer(unit, transfer(c, b, 1n)), { atomic: true })
            .catch((error: unknown) => error);
          return { outcome, refused };
        },
      );
      expect(outcome).toBe("committed");
      // Refused naming y and its shards, as unavailable (an API answers 503), nothing of it written.
      expect(refused).toBeInstanceOf(DatabaseUnavailableError);
      expect(refused).toMatchObject({ code: "DATABASE_UNAVAILABLE", database: "db1" });
      expect(String(refused)).toMatch(/database db1 \(shards 0\/2, 1\/0\) could not be reached/);
      expect(isShardUnavailable(refused)).toBe(true);
      // y came back with its part still prepared: the debit is there, the credit not yet.
      expect((await ledger(world.urls)).sides.get(t.id)).toEqual(["debit"]);
      expect(Object.values(await recoverInChild(world.urls))).toEqual(["committed"]);
      const { sides, total } = await ledger(world.urls);
      for (const acknowledged of [before, t, during])
        expect(sides.get(acknowledged.id)).toEqual(["credit", "debit"]);
      expect(sides.size).toBe(3);
      expect(total).toBe(100n);
      expect(await balances([a, b, c])).toEqual([55n, 30n, 15n]);
      expect(await preparedGids(world.urls)).toEqual([]);
    },
    patient(120_000),
  );

  it(
    "y the decider: the action reports ATOMIC_IN_DOUBT; recovery in another process rolls it back everywhere once y is back",
    async () => {
      const b = await walletOn(world.router, S.g0m2, 100n); // y, the decider
      const c = await walletOn(world.router, S.g1m1, 0n); // z
      const t = transfer(b, c, 30n);
      const paused = pausedAfterPrepare(t);
      await paused.reached;
      const outcome = await withClusterStopped(FAULT_SERVER.cluster, FAULT_SERVER.port, async () => {
        paused.open();
        return paused.outcome;
      });
      expect(outcome).toBeInstanceOf(AtomicInDoubtError);
      expect((outcome as AtomicInDoubtError).code).toBe("ATOMIC_IN_DOUBT");
      expect(await preparedGids(world.urls)).toHaveLength(2);
      expect(Object.values(await recoverInChild(world.urls))).toEqual(["rolled-back", "rolled-back"]);
      const { sides, total } = await ledger(world.urls);
      expect(sides.get(t.id)).toBeUndefined();
      expect(sides.size).toBe(0);
      expect(total).toBe(100n);
      expect(await balances([b, c])).toEqual([100n, 0n]);
      expect(await preparedGids(world.urls)).toEqual([]);
    },
    patient(120_000),
  );
});

describe("a participant's server frozen (SIGSTOP) during prepare", () => {
  it(
    "fails within the router's deadline naming the database; once y resumes, recovery leaves nothing of it prepared or committed",
    async () => {
      const a = await walletOn(world.router, S.g0m0, 100n); // x, the decider
      const b = await walletOn(world.router, S.g0m2, 0n); // y
      const t = transfer(a, b, 30n);
      const g = gate();
      const action = world.router.db
        .$action(
          (unit) => {
            stageTransfer(unit, t);
            // y's last step: y is frozen here, so its PREPARE is sent to a frozen server.
            unit.on(b, () => g.wait());
          },
          { atomic: true },
        )
        .then(
          () => "committed",
          (error: unknown) => error,
        );
      await g.reached;
      const other = atomicRouter(world.urls, undefined, { timeoutMs: faultTimeoutMs() });
      try {
        const { error, during } = await withClusterFrozen(FAULT_SERVER.cluster, async () => {
          g.open();
          const error = await action;
          // Another router's recovery round while y is frozen: y did not answer, said so; no hang.
          const during = await other.db.$recoverAtomic({ leaseMs: 0 });
          return { error, during };
        });
        expect(error).toBeInstanceOf(DatabaseTimeoutError);
        expect(error).toMatchObject({ code: "DATABASE_TIMEOUT", database: "db1" });
        expect(String(error)).toMatch(/database db1 \(shards 0\/2, 1\/0\) did not answer/);
        expect(during.unanswered.map((u) => u.database)).toEqual(["db1"]);
        expect(during.unanswered[0]!.error).toBeInstanceOf(DatabaseTimeoutError);
      } finally {
        await other.close();
      }
      // What y's frozen sessions were sent runs once it resumes.
      await eventually("y's sessions to finish what they were sent", async () => {
        const [busy] = await eachDatabase<{ n: number }>(
          [world.urls[1]!],
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`,
        );
        return busy![0]!.n === 0;
      });
      const outcomes = await recoverInChild(world.urls);
      // Whatever reached y before it froze (its PREPARE, if Prisma sent it before giving the
      // transaction up) is rolled back, never committed; x's was rolled back by the action itself.
      expect(Object.values(outcomes).filter((o) => o !== "rolled-back")).toEqual([]);
      const { sides, total } = await ledger(world.urls);
      expect(sides.size).toBe(0);
      expect(total).toBe(100n);
      expect(await balances([a, b])).toEqual([100n, 0n]);
      expect(await preparedGids(world.urls)).toEqual([]);
    },
    patient(120_000),
  );
});
