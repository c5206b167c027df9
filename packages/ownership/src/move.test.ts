import { SpanStatusCode } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { ShardedId } from "@shardkit/id";
import { consumeOnce, emitEvent, idempotent } from "@shardkit/prisma";
import { patient, withClusterFrozen } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { seedBuckets } from "../test/layout.js";
import { startMover } from "../test/movers.js";
import { copyShard, reset, type router, routers, S } from "../test/world.js";
import {
  MoveFailedError,
  MoveInProgressError,
  MovePrecheckError,
  MoveTimeoutError,
  MoveVerifyError,
} from "./errors.js";
import { ShardLease } from "./lease.js";
import { type MoveStep, moveShard, moveSteps } from "./move.js";
import { readPartitionMap } from "./view.js";

/** The moves' target server, which a test freezes: this run's own (test/global-setup.ts). */
const TARGET = inject("moveTarget");

// Live moves between two PostgreSQL servers with wal_level = logical (the global setup makes them).
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => reset(urls));
// A mover process a test started (killed or frozen on purpose) never outlives the test.
const killed: (() => void)[] = [];
afterEach(() => {
  for (const kill of killed.splice(0)) kill();
});

const quiet = () => {};

type Router = ReturnType<typeof router>;

/** A live move of 0/1 from a to e with `map`, quietly, with `extra` options. */
const moveToE = (
  r: Router,
  map: Awaited<ReturnType<Router["open"]>>,
  extra: Partial<Parameters<typeof moveShard>[0]> = {},
) =>
  moveShard({ map, shard: S.g0m1, to: r.databases.e, sourceConnection: urls.a, onProgress: quiet, ...extra });

/** Buckets on `shard`, each with a few confirmations, written through the routed client. */
async function seed(r: Router, shard = S.g0m1, buckets = 50) {
  return seedBuckets(r.db, shard, buckets);
}

/** A router over the emptied databases, its partition map (with `options`), and `n` buckets seeded on 0/1. */
async function seeded(n: number, options?: Parameters<Router["open"]>[0]) {
  const r = make();
  const map = await r.open(options);
  return { r, map, buckets: await seed(r, S.g0m1, n) };
}

/**
 * `seeded(n, options)`, and a mover process (`env`) started meanwhile: its start-up (a process of its
 * own, its clients and map) overlaps the seeding; its move starts at `go()`. Killed after the test.
 */
async function seededWithMover(
  n: number,
  env: Parameters<typeof startMover>[1],
  options?: Parameters<Router["open"]>[0],
) {
  const starting = startMover(urls, env).then((mover) => {
    killed.push(mover.kill);
    return mover;
  });
  // Both waited for, so a mover never starts after the test that made it has ended.
  const [world, mover] = await Promise.allSettled([seeded(n, options), starting]);
  if (world.status === "rejected") throw world.reason;
  if (mover.status === "rejected") throw mover.reason;
  return { ...world.value, mover: mover.value };
}

/** What replication left on the servers: slots, publications, subscriptions of shardkit moves. */
async function leftovers(r: Router) {
  const [slots] = await r.clients.a.$queryRawUnsafe<{ n: number }[]>(
    "SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name LIKE 'shardkit_move_%'",
  );
  const pubs = await Promise.all(
    [r.clients.a, r.clients.e].map((c) =>
      c.$queryRawUnsafe<{ n: number }[]>("SELECT count(*)::int AS n FROM pg_publication"),
    ),
  );
  const subs = await Promise.all(
    [r.clients.a, r.clients.e].map((c) =>
      c.$queryRawUnsafe<{ n: number }[]>(
        "SELECT count(*)::int AS n FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
      ),
    ),
  );
  return { slots: slots!.n, publications: pubs.map((p) => p[0]!.n), subscriptions: subs.map((s) => s[0]!.n) };
}

/** Nothing of a move is left on the servers. */
const expectNoLeftovers = async (r: Router) =>
  expect(await leftovers(r)).toEqual({ slots: 0, publications: [0, 0], subscriptions: [0, 0] });

/** Every step a move can stop after, in order. */
const STEPS = moveSteps("live").filter((s) => s !== "precheck" && s !== "cleanup" && s !== "done");
/** The steps after which the move has switched: a failure there is finished, never undone. */
const SWITCHED: MoveStep[] = ["switch", "teardown"];

/** How many of a and e record shard 0/1 as owned. */
async function ownersOf(r: Router): Promise<number> {
  const owners = await Promise.all(
    [r.clients.a, r.clients.e].map((c) =>
      c.$queryRawUnsafe<{ state: string }[]>(
        `SELECT state FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`,
      ),
    ),
  );
  return owners.filter((rows) => rows[0]?.state === "owned").length;
}

/** The fence triggers a database has for shard 0/1 (its listing). */
async function listed(client: Router["clients"]["a"]): Promise<number> {
  const [row] = await client.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname LIKE 'shardkit_fence_%'
       AND replace(encode(tgargs, 'escape'), '\\000', '|') LIKE '%|${S.g0m1.bits}|%'`,
  );
  return row!.n;
}

/** How many moves of 0/1 the move journal at a records as ended (none while it has no journal yet). */
async function endedMoves(r: Router): Promise<number> {
  const [journal] = await r.clients.a.$queryRawUnsafe<{ present: boolean }[]>(
    `SELECT to_regclass('shardkit."ShardMoveJournal"') IS NOT NULL AS present`,
  );
  if (!journal!.present) return 0;
  const [row] = await r.clients.a.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM shardkit."ShardMoveJournal" WHERE shard = ${S.g0m1.bits} AND ended_at IS NOT NULL`,
  );
  return row!.n;
}

/** Until the move record of 0/1 on a has lapsed by a's clock. */
function untilLapsed(r: Router): Promise<void> {
  return eventually("the lease of 0/1's move lapses by a's clock", async () => {
    const [row] = await r.clients.a.$queryRawUnsafe<{ lapsed: boolean }[]>(
      `SELECT "expiresAt" < clock_timestamp() AS lapsed FROM "ShardMove" WHERE shard = ${S.g0m1.bits}`,
    );
    return !row || row.lapsed;
  });
}

/**
 * Makes the lease of 0/1's move on a lapse now, by a's clock (never later than it would have): for
 * a mover known dead or frozen, whose lease would lapse on its own, so the test need not wait for it.
 * A renewal it sent before may still land after this: callers wait with `untilLapsed` after it.
 */
async function lapseNow(r: Router): Promise<void> {
  await r.clients.a.$executeRawUnsafe(
    `UPDATE "ShardMove" SET "expiresAt" = least("expiresAt", clock_timestamp() - interval '1 millisecond')
     WHERE shard = ${S.g0m1.bits}`,
  );
}

/**
 * After a move of 0/1 (`buckets`, 3 confirmations each) that stopped somewhere: the next move
 * takes it over once its lease lapsed, rolls it forward or back as it should and finishes, the
 * data intact at e, nothing left at a, no replication left behind, no fence left on e, and e takes
 * the shard's writes.
 */
async function expectMoveFinished(
  r: Router,
  map: Awaited<ReturnType<Router["open"]>>,
  buckets: string[],
  resumed: "rolled-forward" | "rolled-back" | null,
) {
  await untilLapsed(r);
  const result = await moveToE(r, map);
  expect(result.resumed).toBe(resumed);
  expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
  expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(buckets.length);
  expect(await r.clients.e.confirmation.count()).toBe(3 * buckets.length);
  expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0);
  await expectNoLeftovers(r);
  expect(await listed(r.clients.e)).toBe(0); // the new owner's fence for 0/1 is gone: its writes pay nothing
  const view = await readPartitionMap(r.registry);
  expect([view.stopped, view.leftovers, view.issues]).toEqual([[], [], []]);
  await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 7 } });
  expect((await r.clients.e.bucket.findUnique({ where: { id: buckets[0]! } }))?.remaining).toBe(7);
}

/** Writers of `buckets` through `r` until stopped: every acknowledged confirmation, and every failure. */
function writers(r: Router, groups: { buckets: string[]; desk: string }[]) {
  const acked = new Set<string>();
  const failures: unknown[] = [];
  let writing = true;
  const writer = async (bucketIds: string[], desk: string) => {
    for (let i = 0; writing; i++) {
      const bucketId = bucketIds[i % bucketIds.length]!;
      const id = ShardedId.colocatedWith("Confirmation", bucketId);
      try {
        await r.db.confirmation.create({ data: { id, bucketId, desk } });
        acked.add(id);
      } catch (error) {
        failures.push(error);
      }
      await new Promise((resolve) => setTimeout(resolve, 4)); // a paced load, not a flood
    }
  };
  const running = groups.map((g) => writer(g.buckets, g.desk));
  return {
    acked,
    failures,
    stop: async () => {
      writing = false;
      await Promise.all(running);
    },
  };
}

/** Every acknowledged confirmation is at its shard's owner (a or e), exactly once. */
async function expectNothingLost(r: Router, acked: Set<string>) {
  const rows = [
    ...(await r.clients.e.confirmation.findMany({ select: { id: true } })),
    ...(await r.clients.a.confirmation.findMany({ select: { id: true } })),
  ].map((c) => c.id);
  const at = new Set(rows);
  for (const id of acked) expect(at.has(id), id).toBe(true);
  expect(rows.length).toBe(at.size); // nothing twice
}

describe("moveShard (live, PostgreSQL logical replication)", () => {
  it(
    "moves a shard while it takes writes: every acknowledged write is at the new owner exactly once, other shards unaffected, nothing left behind",
    async () => {
      const r = make();
      const map = await r.open();
      const buckets = await seed(r);
      const other = await seed(r, S.g0m0, 5);
      // What else the shard holds: an outbox event, a command's idempotency key, a consumed event.
      const consumed = ShardedId.generate("Event", S.g1m0);
      const confirm = { shard: S.g0m1, kind: "confirm", key: "k-1" };
      await r.db.$transactionOn(S.g0m1, async (tx) => {
        await emitEvent(tx, S.g0m1, { topic: "bucket.confirmed", aggregateId: buckets[0]!, payload: {} });
        await idempotent(tx, confirm, { bucket: buckets[0] }, async () => "confirmed");
        await consumeOnce(tx, S.g0m1, "audit", consumed);
      });
      const load = writers(r, [
        { buckets, desk: "moving" },
        { buckets, desk: "moving-2" },
        { buckets: other, desk: "other" },
      ]);
      const steps: MoveStep[] = [];
      const result = await moveToE(r, map, { onProgress: (p) => steps.push(p.step) });
      await load.stop();

      expect(load.failures).toEqual([]);
      expect(result).toMatchObject({
        shard: "0/1",
        from: "a",
        to: "e",
        epoch: 2,
        mode: "live",
        resumed: null,
      });
      expect(result.rows.Bucket).toBe(50);
      expect(result.freezeMs).toBeGreaterThan(0);
      // The rows written while it copied were checked again inside the fence: the moving writers' confirmations.
      expect(result.changedRows).toBeGreaterThan(0);
      // Each step reported as it starts (copy, catch-up and the checks report again with their progress).
      expect(steps.filter((step, k) => step !== steps[k - 1])).toEqual(moveSteps("live"));
      await expectNothingLost(r, load.acked);
      expect(await r.clients.e.confirmation.count()).toBe(
        150 + [...load.acked].filter((id) => r.registry.databaseOf(id).name === "e").length,
      );
      expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0); // the old copy, cleaned up
      expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
      // The event, the key and the consumed event moved with the shard: at e, the command replays its
      // recorded decision and the event is known as consumed; nothing of them is left at a.
      await r.db.$transactionOn(S.g0m1, async (tx) => {
        expect(await idempotent(tx, confirm, { bucket: buckets[0] }, async () => "again")).toEqual({
          result: "confirmed",
          replayed: true,
        });
        expect(await consumeOnce(tx, S.g0m1, "audit", consumed)).toBe(false);
      });
      expect(await r.clients.e.outboxEvent.count({ where: { aggregateId: buckets[0]! } })).toBe(1);
      for (const table of [
        "OutboxEvent",
        "IdempotencyKey",
        "ProcessedEvent",
        "ShardMove",
        "ShardMoveChange",
      ]) {
        const [left] = await r.clients.a.$queryRawUnsafe<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM "${table}"`,
        );
        expect(left!.n, table).toBe(0);
      }
      await expectNoLeftovers(r);
      expect(await listed(r.clients.e)).toBe(0);
      map.close();
    },
    patient(120_000),
  );

  it("moves a shard live between two databases of one server (its slot made apart) while it takes writes: nothing lost or doubled, nothing left behind", async () => {
    const r = make();
    const map = await r.open();
    const buckets = await seed(r);
    const load = writers(r, [{ buckets, desk: "one-server" }]);
    const result = await moveShard({
      map,
      shard: S.g0m1,
      to: r.databases.b,
      sourceConnection: urls.a,
      onProgress: quiet,
    });
    await load.stop();
    expect(load.failures).toEqual([]);
    expect(result).toMatchObject({ shard: "0/1", from: "a", to: "b", mode: "live", resumed: null });
    expect(r.registry.databaseOf(S.g0m1).name).toBe("b");
    // Every acknowledged write is at b exactly once, and none of the shard's rows is left at a.
    const atB = (await r.clients.b.confirmation.findMany({ select: { id: true } })).map((c) => c.id);
    expect(new Set(atB).size).toBe(atB.length);
    for (const id of load.acked) expect(atB.includes(id), id).toBe(true);
    expect(atB.length).toBe(150 + load.acked.size);
    expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0);
    // No slot, publication or subscription of the move on the server.
    const [left] = await r.clients.a.$queryRawUnsafe<{ slots: number; pubs: number; subs: number }[]>(
      `SELECT (SELECT count(*)::int FROM pg_replication_slots) AS slots,
              (SELECT count(*)::int FROM pg_publication) AS pubs,
              (SELECT count(*)::int FROM pg_subscription) AS subs`,
    );
    expect(left).toEqual({ slots: 0, pubs: 0, subs: 0 });
  });

  it("refuses to start when a pre-check fails, naming each problem, and changes nothing", async () => {
    const r = make();
    const map = await r.open();
    const [bucket] = await seed(r, S.g0m1, 1);
    // A leftover of the shard at the target, and a column the source does not have.
    await r.clients.e.$executeRawUnsafe(
      `INSERT INTO "Bucket" (id, name, remaining) VALUES ($1::uuid, 'leftover', 1)`,
      ShardedId.generate("Bucket", S.g0m1),
    );
    await r.clients.e.$executeRawUnsafe(`ALTER TABLE "Confirmation" ADD COLUMN note text`);
    try {
      const error = await moveToE(r, map).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MovePrecheckError);
      const issues = (error as MovePrecheckError).issues.join("\n");
      expect(issues).toMatch(/e: already holds 1 rows of shard 0\/1/);
      expect(issues).toMatch(/Confirmation: the target's columns .* differ from the source's/);
      await expectNoLeftovers(r);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await r.db.bucket.update({ where: { id: bucket! }, data: { remaining: 1 } }); // still served at a
    } finally {
      await r.clients.e.$executeRawUnsafe(`ALTER TABLE "Confirmation" DROP COLUMN note`);
    }
    map.close();
  });

  it.each(STEPS)(
    "a move that fails after %s says where, what it left and what a rerun does; it never leaves two writers, and the next move finishes",
    async (stop) => {
      const { r, map, buckets } = await seeded(10, { retries: 1 });
      const failure = await moveToE(r, map, {
        afterStep: (step) => {
          if (step === stop) throw new Error(`the mover's host went away after ${stop}`);
        },
      }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(MoveFailedError);
      const { left, rerun, step, message } = failure as MoveFailedError;
      expect(step).toBe(stop);
      expect(message).toMatch(new RegExp(`failed at ${stop} \\(the mover's host went away after ${stop}\\)`));
      expect(await ownersOf(r)).toBe(1);
      if (SWITCHED.includes(stop)) {
        // Switched: e owns the shard; the rest is finished by a rerun.
        expect([left, rerun]).toEqual(["half-done", "finish"]);
        expect(message).toMatch(/e owns the shard \(epoch 2\).*Run the same move again to finish it/);
        await expectMoveFinished(r, map, buckets, "rolled-forward");
      } else {
        // Undone at once: a owns the shard and takes its writes, nothing of the move is left.
        expect([left, rerun]).toEqual(["undone", null]);
        expect(message).toMatch(/It was undone: a owns the shard/);
        await expectNoLeftovers(r);
        expect(await r.clients.e.bucket.count()).toBe(0);
        await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 3 } });
        await expectMoveFinished(r, map, buckets, null);
      }
      map.close();
    },
    patient(90_000),
  );
});

describe("a target whose tables a long transaction holds (a vacuum, a long writer)", () => {
  it(
    "a move whose target must wait for its table's lock for several lease periods before the copy starts: its lease is kept and nothing is taken over; it finishes, nothing lost",
    async () => {
      const { r, map, buckets } = await seeded(10);
      // The lock a vacuum holds: the trigger DDL that lists the shard in e's fence waits for it.
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let holding!: () => void;
      const held = new Promise<void>((resolve) => {
        holding = resolve;
      });
      const vacuum = r.clients.e.$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe(`LOCK TABLE "Bucket" IN SHARE UPDATE EXCLUSIVE MODE`);
          holding();
          await released;
        },
        { timeout: patient(120_000) },
      );
      await held;
      let freed: ReturnType<typeof setTimeout> | undefined;
      const steps: MoveStep[] = [];
      const result = await moveToE(r, map, {
        leaseMs: 1000,
        onProgress: (p) => {
          steps.push(p.step);
          // The lock is held for three lease periods after the target is first asked to list the shard.
          if (p.step === "receive" && !freed) freed = setTimeout(release, 3000);
        },
      }).finally(() => {
        clearTimeout(freed);
        release();
      });
      await vacuum;
      expect(result).toMatchObject({ shard: "0/1", to: "e", resumed: null });
      expect(steps).toContain("receive");
      expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(10);
      expect(await r.clients.e.confirmation.count()).toBe(30);
      expect(await r.clients.a.bucket.count()).toBe(0);
      await expectNoLeftovers(r);
      map.close();
    },
    patient(90_000),
  );
});

describe("a mover stuck inside its fence", () => {
  it(
    "stops renewing its lease once the shard has been fenced for longer than its freeze budget: routers give the shard back, and the mover, when it goes on, takes its move back and undoes it",
    async () => {
      const { r, map, buckets } = await seeded(5);
      const writer = make();
      const writing = await writer.open();
      const failure = await moveToE(r, map, {
        leaseMs: 1000,
        freezeBudgetMs: 1000,
        afterStep: async (step) => {
          if (step !== "fence") return;
          // The mover stalls here (a database it waits for does not answer). A service's writes:
          // held in its router, then let through once the lease lapsed and the fence was given back.
          await writer.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 1 } });
        },
      }).catch((e: unknown) => e);
      expect(writing.counters.heals).toBe(1);
      expect(failure).toBeInstanceOf(MoveFailedError);
      expect(failure).toMatchObject({ left: "undone", rerun: null });
      expect((failure as Error).message).toMatch(
        /a router gave the shard back to a; the move was then undone/,
      );
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      expect((await r.clients.a.bucket.findUnique({ where: { id: buckets[0]! } }))?.remaining).toBe(1);
      // Nothing of it is left: the copy at e, the replication objects, the move's record.
      expect(await r.clients.e.bucket.count()).toBe(0);
      await expectNoLeftovers(r);
      const view = await readPartitionMap(r.registry);
      expect([view.stopped, view.leftovers, view.issues]).toEqual([[], [], []]);
      writing.close();
      await expectMoveFinished(r, map, buckets, null);
      map.close();
    },
    patient(60_000),
  );
});

describe("a database that stops answering in the middle of a move", () => {
  it(
    "a target whose server freezes during the copy: the move stops within its budgets (the copy's, then the undo's), naming the database it waited for, and gives its lease up; the source owns the shard and takes its writes throughout; once the server answers again, the next move undoes what was left and moves the shard, nothing lost",
    async () => {
      const { r, map, buckets } = await seeded(10);
      const load = writers(r, [{ buckets, desk: "during" }]);
      let thaw!: () => void;
      const thawed = new Promise<void>((resolve) => {
        thaw = resolve;
      });
      let frozen: Promise<void> | undefined;
      const ackedBefore = { n: 0 };
      // The copy's budget is waited out three times (the copy, reading what its slots wait for, then
      // the undo) on a frozen server: as long as the steps before the freeze (publish, subscribe)
      // need, scaled by the machine's load, and never more than 6 s (a freeze past a's
      // wal_sender_timeout, 60 s, is another test's matter).
      const copyTimeoutMs = Math.min(patient(3000), 6000);
      let endedBefore = 0;
      let settled = false;
      const moving = moveToE(r, map, {
        copyTimeoutMs,
        afterStep: async (step) => {
          if (step !== "subscribe") return;
          endedBefore = await endedMoves(r);
          // From here e's server answers nothing (SIGSTOP): its connections stay open, its statements hang.
          await new Promise<void>((resolve) => {
            frozen = withClusterFrozen(TARGET.cluster, async () => {
              ackedBefore.n = load.acked.size;
              resolve();
              // Thawed by the test, or at the latest when its time is up: never frozen for the next test.
              await Promise.race([thawed, new Promise((r) => setTimeout(r, patient(90_000)).unref())]);
            });
          });
        },
      })
        .catch((e: unknown) => e)
        .finally(() => {
          settled = true;
        });
      let failure: unknown;
      try {
        // The move gives up while e is still frozen: its end is recorded at a once its budgets are
        // spent (what it does after that, telling every router, waits for e no longer: e is thawed).
        await eventually(
          "the move gives up (its end recorded at a)",
          async () => settled || (frozen !== undefined && (await endedMoves(r)) > endedBefore),
        );
        // The source took the shard's writes while e was frozen, before and after the move gave up.
        expect(load.acked.size).toBeGreaterThan(ackedBefore.n);
        const ackedAtFailure = load.acked.size;
        await eventually(
          "a takes writes after the move gave up",
          async () => load.acked.size > ackedAtFailure,
        );
        expect(load.failures).toEqual([]);
      } finally {
        thaw();
        await frozen;
        failure = await moving;
      }
      expect(failure, String(failure)).toBeInstanceOf(MoveFailedError);
      expect(failure).toMatchObject({ step: "copy", left: "half-done", rerun: "undo" });
      const cause = (failure as Error).cause;
      expect(cause).toBeInstanceOf(MoveTimeoutError);
      // What the slots wait for is read within the copy's budget too; e, frozen, is named again.
      expect((cause as Error).message).toBe(
        `shard 0/1: the copy (waiting for e); reading what its replication slots wait for (waiting for e) did not finish within ${copyTimeoutMs} ms`,
      );
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await load.stop();
      await untilLapsed(r);
      const result = await moveToE(r, map);
      expect(result.resumed).toBe("rolled-back");
      expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
      await expectNothingLost(r, load.acked);
      expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(buckets.length);
      expect(await r.clients.a.confirmation.count()).toBe(0);
      await expectNoLeftovers(r);
      const view = await readPartitionMap(r.registry);
      expect([view.stopped, view.leftovers, view.issues]).toEqual([[], [], []]);
      map.close();
    },
    patient(90_000),
  );
});

describe("a mover process killed with SIGKILL", () => {
  it.each(STEPS)(
    "after %s: one writer at most; the shard takes writes again within its lease without a person; the next move takes over and finishes",
    async (stop) => {
      const { r, map, buckets, mover } = await seededWithMover(10, { STOP_AFTER: stop, LEASE_MS: "1500" });
      mover.go();
      expect(await mover.exited).toBe("SIGKILL");
      expect(await ownersOf(r)).toBeLessThanOrEqual(1);
      // Writes of the shard go through again (a fence whose mover died is given back by the first
      // router it refuses, once the lease has lapsed), with no person involved: a router with the
      // default retries.
      const writer = make();
      const writing = await writer.open();
      await writer.db.bucket.update({ where: { id: buckets[1]! }, data: { remaining: 1 } });
      if (["fence", "final-position", "verify-changes"].includes(stop))
        expect(writing.counters.heals).toBe(1);
      // Until the next move, what the dead mover left is reported: its stopped move, and its slot if it
      // made one. Its lease is made to lapse now (where the write above waited for it, it has).
      await lapseNow(r);
      await untilLapsed(r);
      const view = await readPartitionMap(r.registry);
      expect(view.stopped.map((m) => [m.database, m.shard.key, m.to])).toEqual([["a", "0/1", "e"]]);
      const slots = view.leftovers.filter((o) => o.kind === "slot" && o.database === "a");
      expect(slots.length).toBe(
        STEPS.slice(STEPS.indexOf("subscribe"), STEPS.indexOf("switch") + 1).includes(stop) ? 1 : 0,
      );
      writing.close();
      await expectMoveFinished(r, map, buckets, SWITCHED.includes(stop) ? "rolled-forward" : "rolled-back");
      map.close();
    },
    patient(120_000),
  );

  it("a mover that dies between the switch's two commits (decided at the source, not yet at the target): the first router the target refuses completes the switch", async () => {
    const { r, map, buckets } = await seeded(3);
    const lease = await ShardLease.take(map, S.g0m1, r.databases.e, { leaseMs: 1000 });
    await lease.fence();
    await lease.receive();
    await copyShard(map, lease);
    await lease.verified();
    const { epoch } = await lease.decide(); // and then the mover is gone
    expect(epoch).toBe(2);
    expect(await ownersOf(r)).toBe(0);
    const writer = make();
    const writing = await writer.open();
    await writer.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 1 } });
    expect(writing.counters.completions).toBe(1);
    expect([
      await ownersOf(r),
      writer.registry.databaseOf(S.g0m1).name,
      writer.registry.epochOf(S.g0m1),
    ]).toEqual([1, "e", 2]);
    writing.close();
    await untilLapsed(r);
    const result = await moveToE(r, map);
    expect(result.resumed).toBe("rolled-forward");
    expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0);
    map.close();
  });
});

describe("two movers of one shard", () => {
  // One live move per verify setting, paused after every step in turn (the writers ride out each
  // pause): at each pause a second mover is tried and refused. A refusal changes nothing, so the
  // pauses before it leave the first move where a pause at that step alone would.
  it.each([true, false])(
    "a second mover while the first is paused after any step (verify %s) is refused, naming the holder, its step and its lease; the first finishes and nothing is lost",
    async (verify) => {
      // The writers ride out the whole pause (the test's own doing), however slow the machine (the
      // map's retries). The first mover's writes may wait through three pauses inside its fence (each
      // with a second mover tried): three times the default budget, scaled by the machine's load.
      const {
        r,
        map,
        buckets,
        mover: first,
      } = await seededWithMover(
        10,
        {
          PAUSE_AFTER: STEPS.join(","),
          VERIFY: verify ? "1" : "0",
          FREEZE_BUDGET_MS: String(patient(30_000)),
        },
        { retries: 400 },
      );
      const load = writers(r, [{ buckets, desk: "moving" }]);
      first.go();
      for (const pause of STEPS) {
        expect(await first.next()).toBe(`paused ${pause}`);
        const second = await moveToE(r, map, {
          ...(verify ? {} : { verify: false }),
        }).catch((e: unknown) => e);
        expect(second, pause).toBeInstanceOf(MoveInProgressError);
        expect((second as MoveInProgressError).lease, pause).toMatchObject({
          holder: `mover ${first.pid}`,
          to: "e",
          database: "a",
        });
        expect((second as Error).message, pause).toMatch(/lapses in \d+\.\d s unless renewed/);
        first.go();
      }
      const outcome = await first.outcome();
      expect(outcome).toMatchObject({ ok: true, result: { from: "a", to: "e", epoch: 2 } });
      await load.stop();
      expect(load.failures).toEqual([]);
      await expectNothingLost(r, load.acked);
      expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(10);
      await expectNoLeftovers(r);
      map.close();
    },
    patient(240_000),
  );

  it.each(["receive", "copy", "fence", "verify-changes", "switch", "teardown"] as const)(
    "a mover frozen after %s past its lease: another mover takes the move over and completes; the frozen one, thawed, is refused at its next step and changes nothing",
    async (pause) => {
      const {
        r,
        map,
        buckets,
        mover: first,
      } = await seededWithMover(10, { PAUSE_AFTER: pause, LEASE_MS: "1500" }, { retries: 400 });
      const load = writers(r, [{ buckets, desk: "moving" }]);
      first.go();
      expect(await first.next()).toBe(`paused ${pause}`);
      first.freeze(); // its lease is not renewed any more
      // Frozen past its lease: the lease is made to lapse now, by a's clock, rather than waited out
      // (a renewal it had sent before it froze may still land: then it is waited out).
      await lapseNow(r);
      await untilLapsed(r);
      const second = await moveToE(r, map);
      expect(second.resumed).toBe(SWITCHED.includes(pause) ? "rolled-forward" : "rolled-back");
      first.thaw();
      first.go();
      const outcome = await first.outcome();
      expect(outcome).toMatchObject({ ok: false, code: "MOVE_FAILED", left: "taken-over", rerun: null });
      await load.stop();
      await expectNothingLost(r, load.acked);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
      expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(10);
      expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0);
      await expectNoLeftovers(r);
      map.close();
    },
    patient(120_000),
  );
});

describe("the checks of a live move", () => {
  it(
    "a copy spoiled in a row nobody wrote during the move is found before the fence; one spoiled in a row written during the move, inside it; both undone",
    async () => {
      const { r, map, buckets } = await seeded(10);
      const spoil = (id: string) =>
        r.clients.e.$transaction(async (tx) => {
          await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
          await tx.$executeRawUnsafe(`UPDATE "Bucket" SET remaining = -1 WHERE id = $1::uuid`, id);
        });
      const before = await moveToE(r, map, {
        afterStep: async (step) => {
          if (step === "catch-up") await spoil(buckets[0]!);
        },
      }).catch((e: unknown) => e);
      expect(before).toBeInstanceOf(MoveVerifyError);
      expect((before as MoveVerifyError).mismatches).toEqual([
        expect.stringMatching(/^Bucket \(rows not written during the move\): source 10 rows/),
      ]);
      expect([r.registry.databaseOf(S.g0m1).name, await r.clients.e.bucket.count()]).toEqual(["a", 0]);

      const during = await moveToE(r, map, {
        afterStep: async (step) => {
          if (step !== "verify") return;
          // Written at the source after the first check, replicated, then spoiled at the target.
          await r.db.bucket.update({ where: { id: buckets[1]! }, data: { remaining: 55 } });
          await eventually(
            "the update replicates to e",
            async () =>
              (await r.clients.e.bucket.findUnique({ where: { id: buckets[1]! } }))?.remaining === 55,
          );
          await spoil(buckets[1]!);
        },
      }).catch((e: unknown) => e);
      expect(during).toBeInstanceOf(MoveVerifyError);
      expect((during as MoveVerifyError).mismatches).toEqual([
        expect.stringMatching(/^Bucket \(rows written during the move\): source 1 rows/),
      ]);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await expectNoLeftovers(r);
      map.close();
    },
    patient(120_000),
  );
});

describe("a former owner never answers for a shard it lost", () => {
  it(
    "routers that never refresh read, update, delete and count rows of a moved shard after its cleanup: never null, never P2025, never an empty answer",
    async () => {
      const { r, map, buckets } = await seeded(3);
      const checks: ((s: Router) => Promise<void>)[] = [
        async (s) => expect(await s.db.bucket.findUnique({ where: { id: buckets[0]! } })).not.toBeNull(),
        async (s) => expect(await s.db.bucket.findUniqueOrThrow({ where: { id: buckets[0]! } })).toBeTruthy(),
        async (s) => expect(await s.db.bucket.findMany({ where: { id: buckets[1]! } })).toHaveLength(1),
        async (s) => expect(await s.db.bucket.count({ where: { id: buckets[1]! } })).toBe(1),
        async (s) =>
          expect(
            (await s.db.bucket.update({ where: { id: buckets[1]! }, data: { remaining: 9 } })).remaining,
          ).toBe(9),
        async (s) =>
          expect(
            await s.db.bucket.updateMany({ where: { id: buckets[1]! }, data: { remaining: 8 } }),
          ).toEqual({
            count: 1,
          }),
        async (s) =>
          expect(await s.db.confirmation.deleteMany({ where: { bucketId: buckets[2]! } })).toEqual({
            count: 3,
          }),
        async (s) =>
          expect(
            await s.db.$transactionOn(S.g0m1, async (tx) =>
              tx.bucket.findUnique({ where: { id: buckets[2]! } }),
            ),
          ).not.toBeNull(),
      ];
      // One router per check, each with a map read before the move and never refreshed.
      const stale = await Promise.all(
        checks.map(async () => {
          const s = make();
          return { s, map: await s.open() };
        }),
      );
      await moveToE(r, map);
      expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0); // cleaned up
      for (const [i, check] of checks.entries()) {
        const { s, map: staleMap } = stale[i]!;
        expect(s.registry.databaseOf(S.g0m1).name).toBe("a");
        await check(s);
        expect(s.registry.databaseOf(S.g0m1).name).toBe("e");
        expect(staleMap.counters.staleRejections).toBe(1);
        staleMap.close();
      }
      map.close();
    },
    patient(120_000),
  );
});

describe("moveShard (offline)", () => {
  it(
    "fences, copies, verifies and switches; a copy that does not match is undone and the source owns the shard again",
    async () => {
      const { r, map, buckets } = await seeded(20);
      const exporter = new InMemorySpanExporter();
      const telemetry = {
        tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
      };
      const spoiled = await moveShard({
        map,
        shard: S.g0m1,
        to: r.databases.e,
        mode: "offline",
        telemetry,
        onProgress: quiet,
        afterStep: async (step) => {
          if (step === "copy") {
            await r.clients.e.$transaction(async (tx) => {
              await tx.$executeRawUnsafe("SET LOCAL shardkit.mover = 'on'");
              await tx.$executeRawUnsafe(`UPDATE "Bucket" SET remaining = 0 WHERE id = $1::uuid`, buckets[0]);
            });
          }
        },
      }).catch((e: unknown) => e);
      expect(spoiled).toBeInstanceOf(MoveVerifyError);
      expect((spoiled as MoveVerifyError).mismatches[0]).toMatch(/^Bucket: source 20 rows/);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      expect(await r.clients.e.bucket.count()).toBe(0);
      await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 5 } }); // a takes writes again

      const result = await moveShard({
        map,
        shard: S.g0m1,
        to: r.databases.e,
        mode: "offline",
        telemetry,
        onProgress: quiet,
      });
      expect(result).toMatchObject({ mode: "offline", epoch: 2, rows: { Bucket: 20, Confirmation: 60 } });
      // A span per move: the undone one with error status, the other with an event per step.
      const [undone, moved] = exporter.getFinishedSpans();
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(["shardkit.move", "shardkit.move"]);
      expect(undone!.status.code).toBe(SpanStatusCode.ERROR);
      expect(moved!.status.code).toBe(SpanStatusCode.UNSET);
      expect(moved!.attributes).toMatchObject({
        "shardkit.shard": S.g0m1.key,
        "shardkit.move.to": "e",
        "shardkit.move.from": "a",
        "shardkit.move.mode": "offline",
        "shardkit.move.epoch": 2,
      });
      const steps = moved!.events.map((e) => e.attributes?.["shardkit.move.step"]);
      expect(steps.filter((step, k) => step !== steps[k - 1])).toEqual(moveSteps("offline"));
      expect((await r.clients.e.bucket.findUnique({ where: { id: buckets[0]! } }))?.remaining).toBe(5);
      map.close();
    },
    patient(60_000),
  );
});

describe("moveSteps", () => {
  it("the steps a move reports, for the bar's total", () => {
    expect(moveSteps("offline")).toEqual([
      "precheck",
      "lease",
      "receive",
      "fence",
      "copy",
      "verify",
      "switch",
      "teardown",
      "cleanup",
      "done",
    ]);
    expect(moveSteps("live", { cleanup: false })).toHaveLength(14);
  });
});
