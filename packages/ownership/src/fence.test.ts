import { ShardedId } from "@shardkit/id";
import { LOCKS } from "@shardkit/prisma/internal";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { reset, router, S } from "../test/world.js";
import { ShardLease } from "./lease.js";
import { refusalOf } from "./refusal.js";

// The fence is airtight: a writer that began before it either commits before the fence is in place
// (the fence waits for it) or is refused. Raced at every isolation level, on real PostgreSQL, for a
// fence that installs its triggers and for one whose shard was armed first (a move's fence: one row
// update behind the shard's writers).
const r = router();
afterAll(() => r.close());
beforeEach(() => reset());

/** A bucket named `name` (1 remaining) created on `shard` through the routed client: its ID. */
async function newBucket(shard: typeof S.g0m0, name: string) {
  const id = ShardedId.generate("Bucket", shard);
  await r.db.bucket.create({ data: { id, name, remaining: 1 } });
  return id;
}

/** Resolves once the fence's statement waits for a lock held by a writer (seen by the server itself). */
async function fenceWaitingForLock() {
  const admin = new pg.Client({ connectionString: inject("ownershipUrls").a });
  await admin.connect();
  try {
    await eventually("the fence waits for the writer's lock", async () => {
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'
           AND (query LIKE 'CREATE OR REPLACE TRIGGER%' OR query LIKE 'SELECT pg_advisory_xact_lock(${LOCKS.shardWriters}%')`,
      );
      return rows[0].n > 0;
    });
  } finally {
    await admin.end();
  }
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const levels = ["ReadCommitted", "RepeatableRead", "Serializable"] as const;
describe.each(levels.flatMap((level) => [false, true].map((armed) => [level, armed] as const)))(
  "the fence under %s (armed first: %s)",
  (isolationLevel, armed) => {
    /** Opens the map and takes a lease to move 0/1 to e, arming 0/1 first when `armed`. */
    const open = async () => {
      const map = await r.open();
      const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
      if (armed) await lease.arm();
      return { map, lease };
    };
    // Under READ COMMITTED the late writer reads the record as fenced; a snapshot taken before the
    // fence cannot lock the changed record, and says so.
    const lateState = isolationLevel === "ReadCommitted" ? "fenced" : "changed";

    it("a writer that read before the fence and writes after it is refused; nothing it wrote commits", async () => {
      const { map, lease } = await open();
      const id = await newBucket(S.g0m1, "B-173");
      const read = deferred();
      const fenced = deferred();
      const writer = r.clients.a
        .$transaction(
          async (tx) => {
            const bucket = await tx.bucket.findUnique({ where: { id } });
            read.resolve();
            await fenced.promise;
            await tx.confirmation.create({
              data: { id: ShardedId.colocatedWith("Confirmation", id), bucketId: id, desk: "late" },
            });
            return tx.bucket.update({ where: { id }, data: { remaining: bucket!.remaining - 1 } });
          },
          { isolationLevel, timeout: patient(20_000) },
        )
        .catch((e: unknown) => e);
      await read.promise;
      await lease.fence();
      fenced.resolve();
      const outcome = await writer;
      expect(refusalOf(outcome)).toMatchObject({ shard: S.g0m1, state: lateState });
      expect((await r.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(1);
      expect(await r.clients.a.confirmation.count()).toBe(0);
      map.close();
    });

    it("a writer that wrote before the fence commits before it: the fence waits for it, and later writes are refused", async () => {
      const { map, lease } = await open();
      const id = await newBucket(S.g0m1, "B-173");
      const wrote = deferred();
      const release = deferred();
      let committed = false;
      const writer = r.clients.a
        .$transaction(
          async (tx) => {
            await tx.bucket.update({ where: { id }, data: { remaining: 0 } });
            wrote.resolve();
            await release.promise;
          },
          { isolationLevel, timeout: patient(20_000) },
        )
        .then(() => {
          committed = true;
        });
      await wrote.promise;
      let fenceDone = false;
      const fence = lease.fence().then(() => {
        fenceDone = true;
        expect(committed).toBe(true); // the fence completed only after the writer committed
      });
      await fenceWaitingForLock();
      expect(fenceDone).toBe(false);
      release.resolve();
      await writer;
      await fence;
      expect((await r.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(0);
      const after = await r.clients.a.bucket
        .update({ where: { id }, data: { remaining: 5 } })
        .catch((e: unknown) => e);
      expect(refusalOf(after)).toMatchObject({ state: "fenced" });
      map.close();
    });
  },
);

describe("an armed shard's fence", () => {
  it("is one row update: it installs nothing, and a writer of another shard of the same tables, its transaction open, does not hold it up", async () => {
    const map = await r.open();
    const other = await newBucket(S.g0m0, "B-1");
    const id = await newBucket(S.g0m1, "B-173");
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.arm();
    const triggers = () =>
      r.clients.a.$queryRawUnsafe<{ t: string }[]>(
        `SELECT string_agg(oid::text || ':' || xmin::text, ',' ORDER BY oid) AS t FROM pg_trigger WHERE tgname LIKE 'shardkit_fence_%'`,
      );
    const before = await triggers();
    expect(before[0]!.t).not.toBeNull();

    // A writer of 0/0 (same database, same table) keeps its transaction open across the fence.
    const wrote = deferred();
    const release = deferred();
    const writer = r.clients.a.$transaction(
      async (tx) => {
        await tx.bucket.update({ where: { id: other }, data: { remaining: 0 } });
        wrote.resolve();
        await release.promise;
      },
      { timeout: patient(20_000) },
    );
    await wrote.promise;
    await lease.fence(); // completes while the writer of 0/0 is still open
    release.resolve();
    await writer;

    expect(await triggers()).toEqual(before);
    const refused = await r.clients.a.bucket
      .update({ where: { id }, data: { remaining: 0 } })
      .catch((e: unknown) => e);
    expect(refusalOf(refused)).toMatchObject({ shard: S.g0m1, state: "fenced" });
    map.close();
  });
});

describe("writes that the fence's row triggers would not see", () => {
  it("an UPDATE that moves a row into a fenced shard (its shard column changed) is refused, and one out of it too", async () => {
    const map = await r.open();
    const inside = await newBucket(S.g0m1, "in");
    const outside = await newBucket(S.g0m0, "out");
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.fence();
    const into = await r.clients.a
      .$executeRawUnsafe(
        `UPDATE "Bucket" SET id = $1::uuid WHERE id = $2::uuid`,
        ShardedId.generate("Bucket", S.g0m1),
        outside,
      )
      .catch((e: unknown) => e);
    expect(refusalOf(into)).toMatchObject({ shard: S.g0m1, state: "fenced" });
    const outOf = await r.clients.a
      .$executeRawUnsafe(
        `UPDATE "Bucket" SET id = $1::uuid WHERE id = $2::uuid`,
        ShardedId.generate("Bucket", S.g0m0),
        inside,
      )
      .catch((e: unknown) => e);
    expect(refusalOf(outOf)).toMatchObject({ shard: S.g0m1, state: "fenced" });
    expect(await r.clients.a.bucket.count({ where: { id: { in: [inside, outside] } } })).toBe(2);
    await lease.unfence();
    await lease.release();
    map.close();
  });

  it("a TRUNCATE while a shard of the database is being moved is refused (it fires no row trigger); once the move ends it goes through", async () => {
    const map = await r.open();
    await newBucket(S.g0m1, "B");
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e);
    await lease.arm();
    const refused = await r.clients.a.$executeRawUnsafe(`TRUNCATE "Bucket"`).catch((e: unknown) => e);
    expect(String((refused as Error).message)).toMatch(
      /TRUNCATE of Bucket refused while shard 0\/1 is being moved/,
    );
    expect(await r.clients.a.bucket.count()).toBe(1);
    await lease.unfence();
    await lease.release();
    await r.clients.a.$executeRawUnsafe(`TRUNCATE "Bucket"`);
    map.close();
  });
});
