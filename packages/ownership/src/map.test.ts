import { ShardedId } from "@shardkit/id";
import { createOutboxRelay, emitEvent, isShardUnavailable, PartialCommitError } from "@shardkit/prisma";
import { httpAnswerOf } from "@shardkit/prisma/fastify";
import { patient, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { copyShard, reset, type router, routers, S, transfer } from "../test/world.js";
import {
  EpochConflictError,
  InvalidMapError,
  MoveInProgressError,
  MoveLeaseLostError,
  OwnershipOptionsError,
  StaleOwnerError,
} from "./errors.js";
import { ShardLease } from "./lease.js";
import { PartitionMap } from "./map.js";
import { findMoves } from "./records.js";
import { refusalOf } from "./refusal.js";
import type { OwnershipSignal } from "./signals.js";
import { readPartitionMap } from "./view.js";

/** The second server, which these tests stop: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const make = routers();
beforeEach(() => reset());

/**
 * Runs `call` until it is no longer refused with InvalidMapError (as a client retries a 503): a
 * router reads the map again for a refused shard at most once per refresh interval, so a call made
 * within that interval after a repair may still be refused.
 */
async function untilAdmitted<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof InvalidMapError) || attempt >= 10_000) throw error;
    }
  }
}

/** A bucket on `shard`, created through the routed client. */
async function bucket(r: ReturnType<typeof router>, shard = S.g0m1, remaining = 5) {
  const id = ShardedId.generate("Bucket", shard);
  await r.db.bucket.create({ data: { id, name: "B-173", remaining } });
  return id;
}

describe("the partition map", () => {
  it("records the configured placement as epoch 1 where no database has a record, and every router reads the same", async () => {
    const one = make();
    const map = await one.open();
    expect(map.entries().map((e) => [e.shard.key, e.database, e.epoch, e.state])).toEqual([
      ["0/0", "a", 1, "owned"],
      ["0/1", "a", 1, "owned"],
      ["1/0", "b", 1, "owned"],
    ]);
    const other = await make().open();
    expect(other.entries().map((e) => [e.shard.key, e.epoch])).toEqual(
      map.entries().map((e) => [e.shard.key, e.epoch]),
    );
  });

  it("a manual transfer under a lease (fence, receive, copy, verified, switch): the old owner refuses every write for the shard, a stale router is refused, refreshes and lands on the new owner", async () => {
    const mover = make();
    const stale = make();
    const map = await mover.open();
    const staleMap = await stale.open(); // read now, never refreshed: it will still think a owns 0/1
    const staleTx = make();
    const txMap = await staleTx.open(); // the same, for a shard transaction
    const staleRead = make();
    const readMap = await staleRead.open(); // the same, for a read of 0/0 and 0/1 together
    const id = await bucket(mover);
    const other = await bucket(mover, S.g0m0);

    const lease = await ShardLease.take(map, S.g0m1, mover.databases.e);
    const { epoch } = await lease.fence();
    expect(epoch).toBe(1);
    // Fenced: a write for 0/1 that reaches a is refused by a itself, whoever sends it.
    const script = await mover.clients.a.bucket
      .update({ where: { id }, data: { remaining: 0 } })
      .catch((e: unknown) => e);
    expect(refusalOf(script)).toMatchObject({ shard: S.g0m1, epoch: 1, state: "fenced" });
    // 0/0, on the same database, is not fenced.
    await mover.db.bucket.update({ where: { id: other }, data: { remaining: 4 } });

    // The caller copies the shard's rows to e, as the mover (past e's fence for an incoming shard).
    await lease.receive();
    await copyShard(map, lease);
    // Before the switch, e refuses anyone else's write for 0/1.
    const early = await mover.clients.e.bucket
      .update({ where: { id }, data: { remaining: 0 } })
      .catch((e: unknown) => e);
    expect(refusalOf(early)).toMatchObject({ state: "incoming" });

    // A switch takes only a copy this lease verified.
    await expect(lease.switch()).rejects.toBeInstanceOf(EpochConflictError);
    await lease.verified();
    expect((await lease.switch()).epoch).toBe(2);
    expect(map.entries().find((e) => e.shard === S.g0m1)).toMatchObject({
      database: "e",
      epoch: 2,
      state: "owned",
    });

    // The stale router still routes 0/1 to a: a refuses, the router refreshes and retries at e.
    expect(stale.registry.databaseOf(S.g0m1).name).toBe("a");
    const updated = await stale.db.bucket.update({ where: { id }, data: { remaining: 4 } });
    expect(updated.remaining).toBe(4);
    expect(staleMap.counters).toMatchObject({ staleRejections: 1, retries: 1 });
    expect(stale.registry.databaseOf(S.g0m1).name).toBe("e");
    expect(stale.registry.epochOf(S.g0m1)).toBe(2);
    expect((await mover.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(4);
    expect((await mover.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5); // the old copy, untouched

    // The tombstone tells a forgotten script where the shard went.
    const late = await mover.clients.a.bucket.delete({ where: { id } }).catch((e: unknown) => e);
    expect(refusalOf(late)).toMatchObject({ state: "moved", epoch: 2 });
    expect(refusalOf(late)!.peer).toMatch(/\/sk_owner_e_/);

    // Until its cleanup, the old copy is still on a (reads across shards would see it twice).
    expect(await lease.cleanup()).toEqual({
      Bucket: 1,
      Confirmation: 0,
      OutboxEvent: 0,
      IdempotencyKey: 0,
      ProcessedEvent: 0,
      UniqueClaim: 0, // @shardkit/prisma's tables, found in the schema (not in TABLES)
      UniqueClaimToken: 0,
    });
    expect(await mover.clients.a.bucket.findUnique({ where: { id } })).toBeNull();
    expect(await mover.db.$scatter({ policy: "fail" }).bucket.count()).toBe(2);
    await lease.release();
    // A lease of 0/0 (owned by a) can clean nothing up: a holds no tombstone of its move.
    const other0 = await ShardLease.take(map, S.g0m0, mover.databases.e);
    await expect(other0.cleanup()).rejects.toBeInstanceOf(EpochConflictError);
    await other0.release();

    // Shard transactions are retried at the owner too.
    expect(staleTx.registry.databaseOf(S.g0m1).name).toBe("a");
    const inTx = await staleTx.db.$transactionOn(S.g0m1, async (tx) => {
      const b = await tx.bucket.findUnique({ where: { id } });
      return tx.bucket.update({ where: { id }, data: { remaining: b!.remaining - 1 } });
    });
    expect(inTx.remaining).toBe(3);
    expect(txMap.counters.staleRejections).toBe(1);

    // A read of 0/0 and 0/1 that the stale router places on a alone: a does not confirm 0/1, and
    // the same plan runs again where the shards are now, one statement on a and one on e, merged.
    expect(staleRead.registry.databaseOf(S.g0m1).name).toBe("a");
    const both = await staleRead.db.bucket.findMany({ where: { id: { in: [id, other] } } });
    expect(both.map((b) => [b.id, b.remaining]).sort()).toEqual(
      [
        [id, 3],
        [other, 4],
      ].sort(),
    );
    expect(readMap.counters.staleRejections).toBe(1);
    expect(staleRead.registry.databaseOf(S.g0m1).name).toBe("e");
    for (const m of [map, staleMap, txMap, readMap]) m.close();
  });

  it("after a move the old owner's relay leaves the shard's old copy of its events alone; the new owner's relay delivers them once", async () => {
    const r = make();
    const map = await r.open();
    const id = await bucket(r);
    await r.db.$transactionOn(id, (tx) =>
      emitEvent(tx, id, { topic: "bucket.opened", aggregateId: id, payload: {} }),
    );
    await transfer(map, S.g0m1, r.databases.e);
    const delivered: string[] = [];
    const relay = createOutboxRelay({
      registry: r.registry,
      deliver: async (m) => {
        delivered.push(`${m.topic} ${m.aggregateId}`);
      },
    });
    for (let i = 0; i < 3; i++) await relay.runOnce();
    expect(delivered).toEqual([`bucket.opened ${id}`]);
    expect((await r.clients.e.outboxEvent.findFirst())?.status).toBe("delivered");
    expect((await r.clients.a.outboxEvent.findFirst())?.status).toBe("pending"); // the old copy, not claimed
    // Lag counts the events of the shards each database owns: nothing is left to deliver.
    expect((await relay.lag()).map((l) => l.pending)).toEqual([0, 0, 0]);
    map.close();
  });

  it(
    "a router that polls learns of a switch without writing; with a database down it keeps that database's last record",
    async () => {
      const mover = make();
      const watcher = make();
      const map = await mover.open();
      const signals: OwnershipSignal[] = [];
      const watching = await watcher.open({
        refreshIntervalMs: 50,
        onSignal: (signal) => signals.push(signal),
      });
      watching.start();
      await bucket(mover);
      await transfer(map, S.g0m1, mover.databases.e);
      await eventually(
        "the polling router sees the switch",
        () => watcher.registry.databaseOf(S.g0m1).name === "e",
      );
      expect(watcher.registry.epochOf(S.g0m1)).toBe(2);
      expect(signals.some((s) => s.type === "refresh" && s.changed.includes(S.g0m1))).toBe(true);
      await watching.stop();

      // e's server is down: a refresh keeps e's last record (0/1 still routes there) and says it is missing.
      await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
        signals.length = 0;
        await watching.refresh();
        expect(watcher.registry.databaseOf(S.g0m1).name).toBe("e");
        expect(signals).toEqual([{ type: "refresh", changed: [], missing: ["e"], problems: [] }]);
        // The other shards are served as usual.
        await watcher.db.bucket.create({
          data: { id: ShardedId.generate("Bucket", S.g0m0), name: "x", remaining: 1 },
        });
      });
      map.close();
      watching.close();
    },
    patient(60_000),
  );

  it(
    "an idle router's tick looks at one database (the map's version and its records' digest); an announced change makes it look at all and read in full only the databases whose records changed",
    async () => {
      const mover = make();
      const watcher = make();
      const map = await mover.open();
      const checks: OwnershipSignal[] = [];
      const watching = await watcher.open({ refreshIntervalMs: 20, onSignal: (s) => checks.push(s) });
      // Every statement the watcher's map sends, by database and kind (its clients are real; each
      // call is counted on its way through).
      const sent = { a: { digest: 0, full: 0 }, b: { digest: 0, full: 0 }, e: { digest: 0, full: 0 } };
      for (const name of ["a", "b", "e"] as const) {
        const client = watcher.clients[name];
        const query = client.$queryRawUnsafe;
        client.$queryRawUnsafe = function (this: typeof client, sql: string, ...values: unknown[]) {
          if (sql.includes("shardkit_map_check()")) sent[name].digest++;
          if (sql.startsWith("WITH d AS")) sent[name].full++;
          return query.call(this, sql, ...values);
        } as typeof client.$queryRawUnsafe;
      }
      checks.length = 0;
      watching.start();
      await eventually("thirty checks", () => checks.length >= 30);
      await watching.stop(); // the check under way ends first: every count below is final
      expect(checks.every((s) => s.type === "refresh" && s.changed.length === 0)).toBe(true);
      // The first tick looks at all three (it has no version yet); each tick after, at the same one.
      const looks = [sent.a.digest, sent.b.digest, sent.e.digest];
      expect(looks.reduce((n, k) => n + k, 0)).toBeLessThan(2 * checks.length);
      expect(Math.max(...looks)).toBeGreaterThanOrEqual(checks.length - 1);
      for (const name of ["a", "b", "e"] as const) {
        expect(sent[name].full).toBe(0);
        expect(sent[name].digest).toBeGreaterThan(0);
      }

      // A change of owner between a and e: a's and e's records change (a holds the shard fenced for
      // a while), b's do not. The watcher learns of the switch from its checks alone.
      await bucket(mover);
      for (const name of ["a", "b", "e"] as const) sent[name] = { digest: 0, full: 0 };
      watching.start();
      await transfer(map, S.g0m1, mover.databases.e);
      await eventually("the watcher sees the switch", () => watcher.registry.databaseOf(S.g0m1).name === "e");
      await watching.stop();
      expect(watcher.registry.epochOf(S.g0m1)).toBe(2);
      expect(sent.a.full + sent.e.full).toBeGreaterThan(0);
      expect(sent.b.full).toBe(0);
      map.close();
    },
    patient(60_000),
  );

  it("a shard fenced for longer than the wait: its writes wait in the router (a stale one is refused once, never again), then fail with StaleOwnerError, nothing written", async () => {
    const r = make();
    const map = await r.open({ waitMs: 300 });
    const stale = make();
    const staleMap = await stale.open({ waitMs: 300 }); // read before the fence
    const id = await bucket(r);
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.fence();
    await map.refresh(); // r's map reads the fence (its polling would)
    for (const [router, counters, refused] of [
      [r, map.counters, 0], // this router's map knows the shard is fenced: its write never reaches a
      [stale, staleMap.counters, 1], // refused by a once, then it waits in the router
    ] as const) {
      const error = await router.db.bucket
        .update({ where: { id }, data: { remaining: 0 } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StaleOwnerError);
      expect((error as StaleOwnerError).refusal).toMatchObject({ shard: S.g0m1, state: "fenced", epoch: 1 });
      expect(isShardUnavailable(error)).toBe(true);
      expect(counters.staleRejections).toBe(refused);
      // A second write does not reach a either: the router knows now.
      await expect(router.db.bucket.update({ where: { id }, data: { remaining: 0 } })).rejects.toBeInstanceOf(
        StaleOwnerError,
      );
      expect(counters.staleRejections).toBe(refused);
    }
    expect((await r.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5);
    await lease.unfence();
    await lease.release();
    await r.db.bucket.update({ where: { id }, data: { remaining: 0 } });
    map.close();
    staleMap.close();
  });

  it("a stale router's $action after a move runs at the new owner; out of retries it fails with StaleOwnerError (a 503), never a raw SK001", async () => {
    const mover = make();
    const map = await mover.open();
    const id = await bucket(mover);
    const other = await bucket(mover, S.g1m0);
    // Routers that read the map now and are never refreshed: they will still think a owns 0/1.
    const stale = make();
    const staleMap = await stale.open();
    const spent = [make(), make(), make(), make()]; // the same, with no retry allowed
    const spentMaps = await Promise.all(spent.map((r) => r.open({ retries: 0 })));
    await transfer(map, S.g0m1, mover.databases.e);
    expect(stale.registry.databaseOf(S.g0m1).name).toBe("a");

    // Staged writes are refused by a (its tombstone), then placed again where 0/1 is now and run there.
    const staged = await stale.db.$action((unit) => [
      unit.update("bucket", { where: { id }, data: { remaining: 4 } }),
      // A check in the action's transaction reads the owner's copy (a's old copy would say 5).
      unit.on(id, (tx) => tx.bucket.findUnique({ where: { id } })),
    ]);
    expect((staged[0]!.result as { remaining: number }).remaining).toBe(4);
    expect((staged[1]!.result as { remaining: number } | null)?.remaining).toBe(4);
    expect(staleMap.counters).toMatchObject({ staleRejections: 1, retries: 1 });
    expect(stale.registry.databaseOf(S.g0m1).name).toBe("e");
    expect((await mover.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(4);
    expect((await mover.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5); // the old copy, untouched

    const [writer, reader, inTx, cross] = spent as [typeof stale, typeof stale, typeof stale, typeof stale];
    // With no retries left, the refusal reaches the caller as StaleOwnerError naming the shard.
    const refused = await writer.db
      .$action((unit) => unit.update("bucket", { where: { id }, data: { remaining: 3 } }))
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StaleOwnerError);
    expect((refused as StaleOwnerError).refusal).toMatchObject({ shard: S.g0m1, state: "moved" });
    expect(isShardUnavailable(refused)).toBe(true);
    // A decision that only reads is refused at the former owner too (the action asserts its epoch).
    const read = await reader.db
      .$action((unit) => unit.on(id, (tx) => tx.bucket.findUnique({ where: { id } })))
      .catch((e: unknown) => e);
    expect(read).toBeInstanceOf(StaleOwnerError);
    // A shard transaction the same way.
    const txError = await inTx.db
      .$transactionOn(id, (tx) => tx.bucket.update({ where: { id }, data: { remaining: 3 } }))
      .catch((e: unknown) => e);
    expect(txError).toBeInstanceOf(StaleOwnerError);
    // A cross-shard action whose first database refuses: nothing committed, the refusal a StaleOwnerError.
    const crossError = await cross.db
      .$action(
        (unit) => {
          unit.update("bucket", { where: { id }, data: { remaining: 3 } });
          unit.update("bucket", { where: { id: other }, data: { remaining: 3 } });
        },
        { allowCrossShard: true },
      )
      .catch((e: unknown) => e);
    expect(crossError).toBeInstanceOf(PartialCommitError);
    expect((crossError as PartialCommitError).committed).toEqual([]);
    expect(
      (crossError as PartialCommitError).failed.map((f) => [f.shard, f.error instanceof StaleOwnerError]),
    ).toEqual([[S.g0m1, true]]);
    expect((await mover.clients.b.bucket.findUnique({ where: { id: other } }))?.remaining).toBe(5);
    expect((await mover.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(4);
    for (const m of [map, staleMap, ...spentMaps]) m.close();
  });

  it("compare-and-set: a fence or a switch on the wrong state is EpochConflictError and changes nothing", async () => {
    const r = make();
    const map = await r.open();
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.receive();
    await lease.verified();
    await expect(lease.switch()).rejects.toBeInstanceOf(EpochConflictError); // not fenced
    await lease.fence();
    await expect(lease.fence()).rejects.toBeInstanceOf(EpochConflictError); // fenced already
    await lease.switch();
    await expect(lease.switch()).rejects.toBeInstanceOf(EpochConflictError); // switched already
    // Undoing a switched move is refused: the copy at e is the shard now.
    await expect(lease.unfence()).rejects.toBeInstanceOf(EpochConflictError);
    await expect(lease.discard()).rejects.toBeInstanceOf(EpochConflictError);
    expect(map.counters.conflicts).toBe(5);
    await map.refresh();
    expect(map.entries().find((e) => e.shard === S.g0m1)).toMatchObject({ database: "e", epoch: 2 });
    expect(
      await r.clients.e.$queryRawUnsafe(`SELECT state FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`),
    ).toEqual([{ state: "owned" }]);
    await lease.release();
    map.close();
  });

  it("a record that cannot be right refuses its own shard's calls with InvalidMapError (a 503), the other shards work, and routers recover by themselves once it is repaired", async () => {
    const r = make();
    // A refused shard's call reads the map again when the last read is older than the interval: 1 ms here.
    const map = await r.open({ refreshIntervalMs: 1 });
    const id = await bucket(r, S.g0m0);
    const elsewhere = await bucket(r, S.g1m0);
    const cases: [sql: string, problem: RegExp][] = [
      [
        `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'owned')`,
        /shard 0\/0 has two owners: a \(epoch 1\) and b \(epoch 1\)/,
      ],
      [
        `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'bogus')`,
        /state "bogus" is not one of/,
      ],
      [
        `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 0, 'moved')`,
        /epoch 0 is not an integer >= 1/,
      ],
      [
        `INSERT INTO "ShardOwnership" (shard, epoch, state, peer) VALUES (${S.g0m0.bits}, 1, 'moved', 'nowhere/x')`,
        /names database nowhere\/x, which is not in the registry/,
      ],
    ];
    for (const [sql, problem] of cases) {
      await r.clients.b.$executeRawUnsafe(sql);
      await map.refresh();
      expect(map.problemsOf().map((p) => p.shard.key)).toEqual(["0/0"]);
      for (const call of [
        () => r.db.bucket.update({ where: { id }, data: { remaining: 1 } }),
        () => r.db.bucket.findUnique({ where: { id } }),
        () => r.db.$transactionOn(S.g0m0, (tx) => tx.bucket.findUnique({ where: { id } })),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidMapError);
        expect((error as InvalidMapError).shard).toBe(S.g0m0);
        expect((error as Error).message).toMatch(problem);
        expect(isShardUnavailable(error)).toBe(true);
      }
      await r.db.bucket.update({ where: { id: elsewhere }, data: { remaining: 2 } }); // 1/0 on b works
      await r.clients.b.$executeRawUnsafe(`DELETE FROM "ShardOwnership" WHERE shard <> ${S.g1m0.bits}`);
      // Repaired: a later call reads the map again and goes through, with nobody refreshing it.
      await untilAdmitted(() => r.db.bucket.update({ where: { id }, data: { remaining: 3 } }));
      expect(map.problemsOf()).toEqual([]);
    }
    // An owner's record deleted: refused, then repaired (an epoch set back: the next test).
    await r.clients.a.$executeRawUnsafe(`UPDATE "ShardOwnership" SET epoch = 5 WHERE shard = ${S.g0m0.bits}`);
    await map.refresh();
    expect(r.registry.epochOf(S.g0m0)).toBe(5);
    for (const [breakIt, problem] of [
      [
        () => r.clients.a.$executeRawUnsafe(`DELETE FROM "ShardOwnership" WHERE shard = ${S.g0m0.bits}`),
        /a has no record of it.*deleted/,
      ],
    ] as const) {
      await breakIt();
      // The router learns of it from the shard transaction's assertion of its epoch (refused, read, refused).
      const error = await r.db
        .$transactionOn(S.g0m0, (tx) => tx.bucket.update({ where: { id }, data: { remaining: 1 } }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidMapError);
      expect((error as Error).message).toMatch(problem);
      await r.clients.a.$executeRawUnsafe(
        `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 5, 'owned') ON CONFLICT (shard) DO UPDATE SET epoch = 5`,
      );
      await untilAdmitted(() => r.db.bucket.update({ where: { id }, data: { remaining: 4 } }));
    }
    map.close();
  });

  it("an owner's epoch set back after the router saw a higher one: refused with InvalidMapError naming both epochs (its 503 says so), then taken once a later read finds it still so, without a restart", async () => {
    const r = make();
    const map = await r.open(); // a refused shard is read again at most once a second
    const id = await bucket(r, S.g0m0);
    const epochOf = (epoch: number) =>
      r.clients.a.$executeRawUnsafe(
        `UPDATE "ShardOwnership" SET epoch = ${epoch} WHERE shard = ${S.g0m0.bits}`,
      );
    await epochOf(5);
    await map.refresh();
    expect(r.registry.epochOf(S.g0m0)).toBe(5);
    await epochOf(2); // a backup of a restored
    // The router learns of it from the shard transaction's assertion of its epoch (refused, read, refused).
    const error = await r.db
      .$transactionOn(S.g0m0, (tx) => tx.bucket.update({ where: { id }, data: { remaining: 1 } }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidMapError);
    const why =
      /epoch 2 at a is behind epoch 5 already seen \(the record was set back: a restored backup\?\); if a later read finds it still so, routing takes epoch 2/;
    expect((error as Error).message).toMatch(why);
    expect(httpAnswerOf(error)).toMatchObject({
      status: 503,
      body: { error: "SHARD_UNAVAILABLE", shard: "0/0", message: expect.stringMatching(why) },
    });
    // A later read finds the record still so: routing takes epoch 2, and the shard works again.
    await map.refresh();
    expect(map.problemsOf()).toEqual([]);
    expect(r.registry.epochOf(S.g0m0)).toBe(2);
    const updated = await r.db.$transactionOn(S.g0m0, (tx) =>
      tx.bucket.update({ where: { id }, data: { remaining: 1 } }),
    );
    expect(updated.remaining).toBe(1);
    // A record set back and then put forward again before a second read is never taken back.
    await epochOf(1);
    await map.refresh();
    await epochOf(3);
    await map.refresh();
    expect([r.registry.epochOf(S.g0m0), map.problemsOf()]).toEqual([3, []]);
    map.close();
  });

  it("a lease that took over (or a fence a router gave back) must check the copy again: the switch refuses a copy checked by an earlier holder", async () => {
    const r = make();
    const map = await r.open();
    await bucket(r);
    const first = await ShardLease.take(map, S.g0m1, r.databases.e, { leaseMs: 1000 });
    await first.fence();
    await first.receive();
    await copyShard(map, first);
    await first.verified();
    await first.lapse(); // its holder is gone
    // A router refused by the fence gives the shard back to a.
    const writer = make();
    const writing = await writer.open();
    await writer.db.bucket.create({
      data: { id: ShardedId.generate("Bucket", S.g0m1), name: "late", remaining: 1 },
    });
    expect(writing.counters.heals).toBe(1);
    // The first holder cannot go on.
    await expect(first.switch()).rejects.toBeInstanceOf(MoveLeaseLostError);
    // A new holder of the same move fences again, but e's copy was checked by the first one (and the
    // late write is not in it): no switch until this holder checks it.
    const [record] = (await readPartitionMap(r.registry)).stopped;
    expect(record).toMatchObject({ step: "abandoned", to: "e" });
    const [found] = (await findMoves(r.registry, S.g0m1, 5000)).found;
    const second = await ShardLease.takeOver(map, found!, {});
    await second.fence();
    const refused = await second.switch().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EpochConflictError);
    expect((refused as Error).message).toMatch(
      /e's copy was not checked by this lease \(incoming, checked by an earlier holder\)/,
    );
    expect(
      await r.clients.a.$queryRawUnsafe(`SELECT state FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`),
    ).toEqual([{ state: "fenced" }]);
    // And a lease is released only once its move is finished or undone.
    await expect(second.release()).rejects.toBeInstanceOf(EpochConflictError);
    await second.unfence();
    await second.discard();
    await second.release();
    expect(await r.clients.e.bucket.count()).toBe(0);
    writing.close();
    map.close();
  });

  it("a mover whose fence a router gave back takes its own move over again (retake: givenBack) and undoes it: the copy discarded in batches, nothing of the source lost", async () => {
    const r = make();
    const map = await r.open();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await bucket(r, S.g0m1, i));
    const first = await ShardLease.take(map, S.g0m1, r.databases.e, { leaseMs: 1000 });
    await first.fence();
    await first.receive();
    await copyShard(map, first);
    await first.verified();
    expect(await r.clients.e.bucket.count()).toBe(30);
    await first.lapse(); // a slow mover: its lease ran out inside its fence
    const writer = make();
    const writing = await writer.open();
    const late = ShardedId.generate("Bucket", S.g0m1);
    await writer.db.bucket.create({ data: { id: late, name: "late", remaining: 1 } });
    expect(writing.counters.heals).toBe(1);
    await expect(first.switch()).rejects.toBeInstanceOf(MoveLeaseLostError);
    const { lease: again, givenBack } = await first.retake();
    expect(givenBack).toBe(true);
    // The move is this mover's again: nobody else takes it now.
    await expect(first.retake()).rejects.toBeInstanceOf(MoveInProgressError);
    await again.unfence();
    await again.discard({ batchSize: 7 }); // 30 rows: five batches, then the record
    await again.tidy();
    await again.release();
    expect(await r.clients.e.bucket.count()).toBe(0);
    expect(
      await r.clients.e.$queryRawUnsafe(`SELECT state FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`),
    ).toEqual([]);
    expect((await r.clients.a.bucket.findMany({ select: { id: true } })).map((b) => b.id).sort()).toEqual(
      [...ids, late].sort(),
    );
    // Finished: nothing left to take.
    await expect(first.retake()).rejects.toBeInstanceOf(EpochConflictError);
    expect((await readPartitionMap(r.registry)).stopped).toEqual([]);
    await expect(again.discard({ batchSize: 0 })).rejects.toBeInstanceOf(OwnershipOptionsError);
    writing.close();
    map.close();
  });

  it("a shard armed for a move whose mover died is given back by a router's read (no write is refused there)", async () => {
    const r = make();
    const map = await r.open();
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e, { leaseMs: 1000 });
    await lease.arm();
    await lease.lapse();
    const watcher = make();
    const watching = await watcher.open();
    for (let i = 0; i < 100 && watching.counters.heals === 0; i++) await watching.refresh();
    expect(watching.counters.heals).toBe(1);
    expect(
      await r.clients.a.$queryRawUnsafe(
        `SELECT state, peer, attempt FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`,
      ),
    ).toEqual([{ state: "owned", peer: null, attempt: null }]);
    // Its writes no longer note their keys for a move that will not come back.
    await r.db.bucket.create({ data: { id: ShardedId.generate("Bucket", S.g0m1), name: "x", remaining: 1 } });
    expect(await r.clients.a.$queryRawUnsafe(`SELECT count(*)::int AS n FROM "ShardMoveChange"`)).toEqual([
      { n: 0 },
    ]);
    watching.close();
    map.close();
  });

  it("writes held in the router while the shard is fenced run at the new owner once it switches: the old owner sees none of them", async () => {
    const r = make();
    const map = await r.open();
    const id = await bucket(r);
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.fence();
    await map.refresh(); // the router's read (its polling) sees the fence
    const writes = Array.from({ length: 5 }, (_, i) =>
      r.db.bucket.update({ where: { id }, data: { remaining: { decrement: 1 } } }).then(() => i),
    );
    await lease.receive();
    await copyShard(map, lease);
    await lease.verified();
    await lease.switch();
    expect((await Promise.all(writes)).length).toBe(5);
    expect(map.counters.staleRejections).toBe(0);
    expect((await r.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(0);
    expect((await r.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5);
    await lease.tidy();
    await lease.release();
    map.close();
  });

  it("writes held while the shard is fenced, when the mover stops between the switch's two commits: the router completes the switch and they run at the new owner, refused nowhere", async () => {
    const r = make();
    const map = await r.open();
    const id = await bucket(r);
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.fence();
    await lease.receive();
    await copyShard(map, lease);
    await lease.verified();
    const writer = make();
    const writing = await writer.open();
    await writing.refresh(); // it knows the shard is fenced: its writes wait in the router
    const writes = Array.from({ length: 5 }, () =>
      writer.db.bucket.update({ where: { id }, data: { remaining: { decrement: 1 } } }),
    );
    await lease.decide(); // the source's commit only: e still holds the shard incoming
    expect((await Promise.all(writes)).length).toBe(5);
    expect(writing.counters).toMatchObject({ staleRejections: 0, completions: 1 });
    expect((await r.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(0);
    expect((await r.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5);
    lease.stop();
    writing.close();
    map.close();
  });

  it("refuses options that cannot work", async () => {
    const r = make();
    const bad = [
      { registry: r.registry, tables: [] },
      { registry: r.registry, tables: [{ table: "", column: "id" }] },
      { registry: r.registry, tables: [{ table: "Bucket", column: "id", kind: "text" as never }] },
      { registry: r.registry, tables: [{ table: "Bucket", column: "id" }], retries: -1 },
      { registry: r.registry, tables: [{ table: "Bucket", column: "id" }], refreshIntervalMs: 0 },
    ];
    for (const options of bad) {
      await expect(PartitionMap.open(options)).rejects.toBeInstanceOf(OwnershipOptionsError);
    }
  });
});
