import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { patient, withClusterFrozen } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import type { PrismaClient } from "../../test/generated/prisma/client.js";
import { makeWorld, S } from "../../test/world.js";
import { RoutingOptionsError, UnknownShardError } from "../errors.js";
import { type OutboxMessage, outboxRecord } from "../outbox.js";
import { createOutboxRelay, pauseAfter } from "./relay.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

// The relay over many databases: its work limited for the whole relay, the databases taking
// turns, outcomes recorded a group per statement, idle databases polled less often.

const world = makeWorld();
const { clients, registry } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

/** `n` pending events on `shard`, each of its own aggregate, written straight to its database: their IDs. */
async function seed(client: PrismaClient, shard: ShardIdentifier, n: number): Promise<string[]> {
  const rows = Array.from({ length: n }, (_, i) =>
    outboxRecord(shard, { topic: "t", aggregateId: ShardedId.generate("Customer", shard), payload: { i } }),
  );
  await client.outboxEvent.createMany({ data: rows });
  return rows.map((r) => r.id);
}
const databaseOf = (m: OutboxMessage) => registry.databaseOf(m.shard).name;
/** Claims each database ran since the last `world.clear()`, by database (a, b, c). */
const claims = () =>
  Object.fromEntries(
    (["a", "b", "c"] as const).map((key) => [
      key,
      world.log.filter((e) => e.db === key && e.sql.includes("WITH claimed AS")).length,
    ]),
  );
const yieldTurns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe("relay over several databases", () => {
  it(
    "delivers every event exactly once; never more deliveries in flight than deliveryConcurrency, nor databases polled at once than pollConcurrency",
    async () => {
      const ids = [
        ...(await seed(clients.a, S.g0m0, 60)),
        ...(await seed(clients.b, S.g0m2, 60)),
        ...(await seed(clients.c, S.g1m1, 60)),
      ];
      const seen = new Map<string, number>();
      let inFlight = 0;
      let most = 0;
      const busy = new Map<string, number>();
      let mostDatabases = 0;
      const relay = createOutboxRelay({
        registry,
        batchSize: 7,
        deliveryConcurrency: 3,
        pollConcurrency: 2,
        stallMs: 600_000, // no poll gives its turn up early here, however busy the machine
        deliver: async (m) => {
          most = Math.max(most, ++inFlight);
          busy.set(databaseOf(m), (busy.get(databaseOf(m)) ?? 0) + 1);
          mostDatabases = Math.max(mostDatabases, [...busy.values()].filter((n) => n > 0).length);
          await yieldTurns(3); // stays in flight while the other lanes and polls go on
          busy.set(databaseOf(m), busy.get(databaseOf(m))! - 1);
          inFlight--;
          seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
        },
      });
      relay.start();
      await expect.poll(() => seen.size, { timeout: patient(60_000) }).toBe(ids.length);
      await relay.stop();
      expect(most).toBe(3);
      expect(mostDatabases).toBeLessThanOrEqual(2);
      expect([...seen.keys()].sort()).toEqual([...ids].sort());
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
      expect((await relay.lag()).map((l) => l.pending)).toEqual([0, 0, 0]);
    },
    patient(90_000),
  );

  it(
    "databases with backlogs take turns: none polls twice while another waits (pollConcurrency 1)",
    async () => {
      for (const [client, shard] of [
        [clients.a, S.g0m0],
        [clients.b, S.g0m2],
        [clients.c, S.g1m1],
      ] as const) {
        await seed(client, shard, 50);
      }
      const order: string[] = [];
      const relay = createOutboxRelay({
        registry,
        batchSize: 5,
        pollConcurrency: 1,
        stallMs: 600_000,
        deliver: async (m) => void order.push(databaseOf(m)),
      });
      relay.start();
      await expect.poll(() => order.length, { timeout: patient(60_000) }).toBe(150);
      await relay.stop();
      // Each poll delivers 5 events of one database: one name per poll, in the order they ran.
      const polls = order.filter((_, i) => i % 5 === 0);
      expect(polls).toEqual(Array.from({ length: 10 }, () => registry.databases.map((p) => p.name)).flat());
    },
    patient(90_000),
  );

  it(
    "a database with a large backlog delays another's event by at most the rest of one of its polls",
    async () => {
      await seed(clients.a, S.g0m0, 300);
      const order: string[] = [];
      let notifiedAt = -1;
      let late: string | undefined;
      const relay = createOutboxRelay({
        registry,
        batchSize: 10,
        pollConcurrency: 1,
        stallMs: 600_000,
        pollIntervalMs: 600_000, // b sleeps after its first, empty poll: only notify() wakes it
        deliver: async (m) => {
          order.push(m.id);
          // In the middle of a's third poll, b gets an event and the writer says so.
          if (order.length === 25) {
            [late] = await seed(clients.b, S.g0m2, 1);
            relay.notify(S.g0m2);
            notifiedAt = order.length;
          }
        },
      });
      relay.start();
      await expect
        .poll(() => late !== undefined && order.includes(late), { timeout: patient(60_000) })
        .toBe(true);
      await relay.stop();
      // Between the notice and b's event: only the 5 events left of a's poll under way (of 10).
      expect(order.indexOf(late!) - notifiedAt).toBeLessThanOrEqual(10);
    },
    patient(90_000),
  );

  it("a batch whose deliveries end together is recorded in one statement", async () => {
    await seed(clients.a, S.g0m0, 40);
    world.clear();
    const relay = createOutboxRelay({ registry, deliver: async () => {} });
    expect((await relay.runOnce()).databases[0]).toMatchObject({ claimed: 40, delivered: 40 });
    // A claim and one statement for the 40 outcomes (each outcome had its own statement before).
    expect(world.log.filter((e) => e.db === "a" && e.sql.includes('"OutboxEvent"'))).toHaveLength(2);
    const rows = await clients.a.outboxEvent.findMany();
    expect(rows.every((r) => r.status === "delivered" && r.deliveredAt && r.attempts === 1)).toBe(true);
  });

  it("outcomes are recorded while a delivery of the same batch still hangs", async () => {
    const [first, ...rest] = await seed(clients.a, S.g0m0, 4);
    let release!: () => void;
    const relay = createOutboxRelay({
      registry,
      deliveryTimeoutMs: 60_000, // the test releases it long before
      leaseMs: 120_000,
      deliver: (m) =>
        m.id === first ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve(),
    });
    const running = relay.runOnce();
    const delivered = async () =>
      (await clients.a.outboxEvent.findMany({ where: { status: "delivered" } })).map((e) => e.id).sort();
    await expect.poll(delivered, { timeout: patient(20_000) }).toEqual(rest.sort());
    release();
    expect((await running).databases[0]).toMatchObject({ claimed: 4, delivered: 4 });
    expect(await delivered()).toHaveLength(4);
  });

  it(
    "a poll stuck on a frozen server gives its turn up after stallMs: the other databases' events go on",
    async () => {
      await clients.c.outboxEvent.count(); // open a connection to c before it freezes
      const seen: string[] = [];
      const relay = createOutboxRelay({
        registry,
        pollConcurrency: 1,
        stallMs: 100,
        queryTimeoutMs: 60_000, // c's claim would hold the only turn for a minute
        pollIntervalMs: 20,
        onError: () => {},
        deliver: async (m) => void seen.push(m.id),
      });
      world.clear();
      await withClusterFrozen(SECOND.cluster, async () => {
        relay.start();
        // Polls go a, b, c, a: a second claim on a comes after c's claim, stuck, gave its turn up.
        await expect.poll(() => claims().a, { timeout: patient(20_000) }).toBeGreaterThanOrEqual(2);
        const ids = await seed(clients.a, S.g0m0, 3);
        await expect.poll(() => [...seen].sort(), { timeout: patient(20_000) }).toEqual(ids.sort());
      });
      await relay.stop(60_000);
    },
    patient(120_000),
  );

  it("an idle database is polled again only after its pause, or at once when notified", async () => {
    const relay = createOutboxRelay({ registry, pollIntervalMs: 600_000, deliver: async () => {} });
    world.clear();
    relay.start();
    await expect.poll(claims, { timeout: patient(20_000) }).toEqual({ a: 1, b: 1, c: 1 });
    const [id] = await seed(clients.b, S.g1m0, 1);
    relay.notify(id!);
    await expect.poll(claims, { timeout: patient(20_000) }).toEqual({ a: 1, b: 2, c: 1 });
    expect((await relay.lag()).map((l) => l.pending)).toEqual([0, 0, 0]);
    await relay.stop();
    expect(() => relay.notify(ShardIdentifier.of(9, 9))).toThrow(UnknownShardError);
  });

  it("the pause before a database's next poll: none after a full batch, doubling while polls find nothing, up to maxIdleMs", () => {
    const settings = { batchSize: 10, pollIntervalMs: 1000, maxIdleMs: 10_000 };
    expect(pauseAfter(10, 0, settings)).toBe(0);
    expect(pauseAfter(3, 0, settings)).toBe(1000);
    expect([1, 2, 3, 4, 5, 6, 60].map((empty) => pauseAfter(0, empty, settings))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000, 10_000,
    ]);
  });

  it("options that cannot work are refused, all named at once", () => {
    const error = (() => {
      try {
        createOutboxRelay({
          registry,
          pollConcurrency: 0,
          deliveryConcurrency: 1.5,
          stallMs: 0,
          pollIntervalMs: 500,
          maxIdleMs: 100,
          deliver: async () => {},
        });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(RoutingOptionsError);
    expect((error as RoutingOptionsError).issues).toEqual([
      "stallMs must be a positive number of milliseconds, got 0",
      "deliveryConcurrency must be an integer >= 1, got 1.5",
      "pollConcurrency must be an integer >= 1, got 0",
      "maxIdleMs (100) must be at least pollIntervalMs (500): it bounds the pauses that start there",
    ]);
  });
});
