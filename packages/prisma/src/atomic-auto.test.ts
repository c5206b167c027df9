import { PrismaPg } from "@prisma/adapter-pg";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { describe, expect, it } from "vitest";
import {
  LAYOUT,
  ledger,
  models,
  orphanAfterDecision,
  preparedGids,
  S,
  stageTransfer,
  transfer,
  useAtomicWorld,
  walletOn,
} from "../test/atomic-world.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import type { AtomicRecoveryOption } from "./atomic-auto.js";
import type { AtomicRecoveryReport } from "./atomic-recover.js";
import { RoutingOptionsError } from "./errors.js";
import { shardRouting } from "./extension.js";
import { createShardRegistry } from "./registry.js";

// A router's own recovery of atomic actions (`atomicRecovery`, on by default): driven by its own
// atomic actions, never by a clock alone.
const world = useAtomicWorld("auto");

/** A router over the world's databases with its own `atomicRecovery`. */
function routerWith(atomicRecovery: AtomicRecoveryOption) {
  const clients = world.urls.map(
    (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }),
  );
  const registry = createShardRegistry({
    shards: LAYOUT.flatMap((keys, i) => keys.map((key) => ({ shard: key, client: clients[i]! }))),
    databases: clients.map((client, i) => ({ client, name: `db${i}` })),
  });
  const db = clients[0]!.$extends(shardRouting({ registry, models, atomicRecovery }));
  return { db, close: () => registry.disconnect() };
}

describe("atomicRecovery: a router recovers atomic actions by itself", () => {
  it("its first atomic action starts a round, and a round that left an orphan within its lease runs again until it is concluded", async () => {
    // An orphan after the decision, left by a coordinator that stopped for good (the debit committed,
    // the credit prepared).
    const { t: orphan } = await orphanAfterDecision(world, S.g1m1);
    // A new router, whose lease outlasts its own action on a busy machine.
    const reports: AtomicRecoveryReport[] = [];
    const leaseMs = patient(2000);
    const router = routerWith({ leaseMs, everyMs: 200, onReport: (r) => reports.push(r) });
    try {
      const c = await walletOn(world.router, S.g0m2, 50n);
      const d = await walletOn(world.router, S.g1m2, 0n);
      const own = transfer(c, d, 5n);
      await router.db.$action((unit) => stageTransfer(unit, own), { atomic: true });
      await eventually(
        "the router's recovery to commit the orphan",
        async () => (await preparedGids(world.urls)).length === 0,
      );
      expect(reports.length).toBeGreaterThanOrEqual(1);
      expect(reports.flatMap((r) => r.transactions).some((t) => t.outcome === "committed")).toBe(true);
      const sides = (await ledger(world.urls)).sides;
      expect(sides.get(orphan.id)).toEqual(["credit", "debit"]);
      expect(sides.get(own.id)).toEqual(["credit", "debit"]);
      // The last round left nothing in doubt: no further round is scheduled after it.
      await eventually("a round that left nothing in doubt", () =>
        reports.at(-1)!.transactions.every((t) => t.outcome !== "left"),
      );
    } finally {
      await router.close();
    }
  });

  it("checks its options when the router is made", () => {
    expect(() => routerWith({ leaseMs: -1 })).toThrow(RoutingOptionsError);
    expect(() => routerWith({ everyMs: 0 })).toThrow(/atomicRecovery\.everyMs: expected a positive number/);
  });
});
