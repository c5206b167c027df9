import { hostname } from "node:os";
import { createShardRegistry } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { routerOver } from "../../test/layout.js";
import { reset, router, S, TABLES } from "../../test/world.js";
import { BalanceLeaseHeldError } from "../errors.js";
import { BALANCE_LEASE_TABLE, BalanceLease } from "./lease.js";
import { type BalanceRun, runBalance } from "./run.js";

// The fleet's balance lease on the test databases (a, b, e: it is held on each).
const r = router();
afterAll(() => r.close());
const OPTIONS = { leaseMs: 10_000, timeoutMs: patient(10_000) };
const everywhere = (sql: string) =>
  Promise.all(Object.values(r.clients).map((c) => c.$executeRawUnsafe(sql)));

/** Makes the lease lapse now, by its databases' clocks (a run frozen past its lease). */
const lapse = () =>
  everywhere(`UPDATE ${BALANCE_LEASE_TABLE} SET "expiresAt" = clock_timestamp() - interval '1 second'`);

beforeEach(async () => {
  await reset();
  await BalanceLease.take(r.registry, "balance", OPTIONS).then((l) => l.release());
  await everywhere(`DELETE FROM ${BALANCE_LEASE_TABLE}`);
});

describe("the fleet's balance lease", { timeout: patient(30_000) }, () => {
  it("two runs taking it together: exactly one holds it, the other is refused naming the holder and when it expires", async () => {
    const taken = await Promise.allSettled([
      BalanceLease.take(r.registry, "balance", OPTIONS),
      BalanceLease.take(r.registry, "drain of b", OPTIONS),
    ]);
    const held = taken.flatMap((t) => (t.status === "fulfilled" ? [t.value] : []));
    const refused = taken.flatMap((t) => (t.status === "rejected" ? [t.reason] : []));
    expect(held).toHaveLength(1);
    expect(refused).toHaveLength(1);
    const error = refused[0] as BalanceLeaseHeldError;
    // Refused on the first database of the fleet's order, where both runs start.
    const first = (await BalanceLease.order(r.registry, 10_000))[0]!.name;
    expect(error).toBeInstanceOf(BalanceLeaseHeldError);
    expect(error.code).toBe("BALANCE_LEASE_HELD");
    expect(error.holder).toMatchObject({
      host: hostname(),
      pid: process.pid,
      run: held[0]!.run,
      database: first,
    });
    expect(error.holder.expiresInMs).toBeGreaterThan(0);
    expect(error.message).toContain(
      `by host ${hostname()}, pid ${process.pid}, run ${held[0]!.run} (on ${first})`,
    );
    expect(error.message).toContain(`it expires at ${error.holder.expiresAt.toISOString()} (in `);
    // Given up at its end: the next run takes it.
    await held[0]!.release();
    const next = await BalanceLease.take(r.registry, "balance", OPTIONS);
    await next.release();
  });

  it("a lease that lapsed is taken by the next run; the run that held it finds it lost", async () => {
    const first = await BalanceLease.take(r.registry, "balance", OPTIONS);
    await lapse();
    const second = await BalanceLease.take(r.registry, "drain of b", OPTIONS);
    expect(await first.renew()).toBe(
      `drain of b by host ${hostname()}, pid ${process.pid}, run ${second.run} holds it now`,
    );
    // Its end does not give up the other run's lease.
    await first.release();
    expect(await second.renew()).toBeUndefined();
    const error = await BalanceLease.take(r.registry, "balance", OPTIONS).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BalanceLeaseHeldError);
    await second.release();
  });

  it("runBalance while another run holds it: refused before reading anything; a dry run needs no lease", async () => {
    const other = await BalanceLease.take(r.registry, "balance", OPTIONS);
    try {
      const error = await runBalance({ registry: r.registry, tables: TABLES, mode: "offline" }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BalanceLeaseHeldError);
      expect((error as BalanceLeaseHeldError).holder.run).toBe(other.run);
      const dry = await runBalance({ registry: r.registry, tables: TABLES, mode: "offline", dryRun: true });
      expect(dry.stoppedBy).toBe("dry-run");
    } finally {
      await other.release();
    }
  });

  it("a run whose lease lapsed and was taken by another stops before its next move", async () => {
    // A drain of a: two moves (0/0 and 0/1). While the first is under way, its lease lapses and
    // another run takes it. The run's own renewals go on meanwhile (every third of its lease): one
    // that lands between the lapse and the take puts the lease back, so the other run tries again.
    let other: BalanceLease | undefined;
    let takeover: Promise<void> | undefined;
    const run: BalanceRun = await runBalance({
      registry: r.registry,
      tables: TABLES,
      mode: "offline",
      drain: r.databases.a,
      onEvent: (event) => {
        if (event.type === "move" && event.index === 0)
          takeover = eventually("another run took the lapsed lease", async () => {
            await lapse();
            other = await BalanceLease.take(r.registry, "balance", OPTIONS);
            return true;
          });
      },
    });
    await takeover!;
    expect(run.moves).toHaveLength(1);
    expect(run.moves[0]!.status).toBe("moved");
    expect(run.stoppedBy).toBe("lease-lost");
    expect(run.ok).toBe(false);
    expect(run.reason).toMatch(
      new RegExp(
        `^stopped after 1 move, before the next: this run lost the fleet's balance lease \\(balance by host .*, pid ${process.pid}, run ${other!.run} holds it now\\); the drain is not done: a still holds 0/[01]$`,
      ),
    );
    // The lease stays the other run's.
    expect(await other!.renew()).toBeUndefined();
    await other!.release();
  });

  it("runs over configurations that name and order the databases differently, or add one: one holds the lease, the other is refused", async () => {
    // Another service's configuration of the same fleet: its own clients, its own names, another order.
    const other = routerOver(inject("ownershipUrls"));
    const renamed = createShardRegistry({
      shards: [
        { shard: S.g1m0, client: other.clients.b },
        { shard: S.g0m0, client: other.clients.a },
        { shard: S.g0m1, client: other.clients.a },
      ],
      databases: [
        { client: other.clients.e, name: "0-spare" },
        { client: other.clients.b, name: "zz-b" },
        { client: other.clients.a, name: "main" },
      ],
    });
    // An older configuration, before e was added to the fleet.
    const older = createShardRegistry({
      shards: [
        { shard: S.g0m0, client: other.clients.a },
        { shard: S.g0m1, client: other.clients.a },
        { shard: S.g1m0, client: other.clients.b },
      ],
    });
    try {
      // Both orders are the same: by what the databases say they are, not by what a config calls them.
      expect((await BalanceLease.order(renamed, 10_000)).map((d) => d.client)).toEqual(
        (await BalanceLease.order(r.registry, 10_000)).map(
          (d) => ({ a: other.clients.a, b: other.clients.b, e: other.clients.e })[d.name as "a"],
        ),
      );
      const runs = await Promise.allSettled([
        runBalance({ registry: r.registry, tables: TABLES, mode: "offline" }),
        runBalance({ registry: renamed, tables: TABLES, mode: "offline" }),
      ]);
      const refused = runs.flatMap((t) => (t.status === "rejected" ? [t.reason] : []));
      expect(runs.filter((t) => t.status === "fulfilled")).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toBeInstanceOf(BalanceLeaseHeldError);

      for (const [mine, theirs] of [
        [r.registry, renamed],
        [renamed, r.registry],
        [older, r.registry],
        [r.registry, older],
      ] as const) {
        const held = await BalanceLease.take(mine, "balance", OPTIONS);
        const error = await BalanceLease.take(theirs, "balance", OPTIONS).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BalanceLeaseHeldError);
        expect((error as BalanceLeaseHeldError).holder.run).toBe(held.run);
        await held.release();
      }
      // What a refused run took on its way is given back: the next run takes the lease.
      await (await BalanceLease.take(renamed, "balance", OPTIONS)).release();
    } finally {
      await other.registry.disconnect();
    }
  });
});
