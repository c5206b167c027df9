import { ShardedId } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { seedBuckets } from "../test/layout.js";
import { startMover } from "../test/movers.js";
import { reset, type router, routers, S, TABLES } from "../test/world.js";
import { checkMove } from "./check.js";
import { MoveFailedError, MoveTimeoutError } from "./errors.js";
import { type MoveStep, moveShard } from "./move.js";
import { readPartitionMap } from "./view.js";

// Live moves between two databases of ONE server (a and b of `moveUrls`): a mover killed at each
// point of its slot's making and after, and the open transactions of the server's other databases
// that making a logical slot waits for.
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => reset(urls));
const ended: (() => unknown)[] = []; // mover processes, open transactions: never outlive a test
afterEach(async () => {
  for (const end of ended.splice(0)) await end();
});

type Router = ReturnType<typeof router>;
type Map = Awaited<ReturnType<Router["open"]>>;

/** A live move of 0/1 from a to b (one server), quietly. */
const moveToB = (r: Router, map: Map, extra: Partial<Parameters<typeof moveShard>[0]> = {}) =>
  moveShard({
    map,
    shard: S.g0m1,
    to: r.databases.b,
    sourceConnection: urls.a,
    onProgress: () => {},
    ...extra,
  });

/** A router, its map, and 10 buckets of 0/1 with 3 confirmations each. */
async function seeded() {
  const r = make();
  const map = await r.open({ retries: 400 });
  const buckets = await seedBuckets(r.db, S.g0m1, 10);
  return { r, map, buckets };
}

/** A writer of confirmations on `buckets` through its own router until stopped: what it acknowledged. */
async function writer(buckets: string[]) {
  const w = make();
  const map = await w.open({ retries: 400 });
  const acked: string[] = [];
  let writing = true;
  const running = (async () => {
    for (let i = 0; writing; i++) {
      const bucketId = buckets[i % buckets.length]!;
      const id = ShardedId.colocatedWith("Confirmation", bucketId);
      try {
        await w.db.confirmation.create({ data: { id, bucketId, desk: "moving" } });
        acked.push(id);
      } catch {} // refused or timed out: not acknowledged, so not owed
      await new Promise((resolve) => setTimeout(resolve, 5)); // a paced load, not a flood
    }
  })();
  return {
    acked,
    stop: async () => {
      writing = false;
      await running;
      map.close();
    },
  };
}

/** A transaction holding a transaction id, open in another database of a's server (its `postgres`). */
async function openTransaction() {
  const client = new pg.Client({ connectionString: urls.a.replace(/\/[^/]*$/, "/postgres") });
  await client.connect();
  await client.query("BEGIN");
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid, txid_current()");
  let open = true;
  const end = async () => {
    if (!open) return;
    open = false;
    await client.query("COMMIT");
    await client.end();
  };
  ended.push(end);
  return { pid: rows[0]!.pid, end };
}

/** `CREATE SUBSCRIPTION` held at b (a lock on pg_subscription that it needs, reads do not) until `release`. */
async function holdSubscriptions() {
  const client = new pg.Client({ connectionString: urls.b });
  await client.connect();
  await client.query("BEGIN");
  await client.query("LOCK TABLE pg_subscription IN SHARE MODE");
  let held = true;
  const release = async () => {
    if (!held) return;
    held = false;
    await client.query("COMMIT");
    await client.end();
  };
  ended.push(release);
  return release;
}

/** How many statements of the server run `pattern` (SQL LIKE) waiting on a lock (`event`: which). */
async function waiting(r: Router, like: string, event: string) {
  const [row] = await r.clients.a.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE pid <> pg_backend_pid() AND query LIKE $1 AND wait_event_type = 'Lock' AND wait_event = $2`,
    like,
    event,
  );
  return row!.n;
}

/** A mover of 0/1 to b (a short lease), started and waited for until one of its statements waits on a lock (as `waiting` finds it). */
async function moverWaiting(r: Router, what: string, like: string, event: string) {
  const mover = await startMover(urls, { TO: "b", LEASE_MS: "1500" });
  ended.push(mover.kill);
  mover.go();
  await eventually(what, async () => (await waiting(r, like, event)) === 1);
  return mover;
}

/** Every replication object on the server (slots of any name, the table copies' too), publications of a, subscriptions. */
async function onServer(r: Router) {
  const [row] = await r.clients.a.$queryRawUnsafe<{ slots: string[]; pubs: number; subs: number }[]>(
    `SELECT ARRAY(SELECT slot_name::text FROM pg_replication_slots ORDER BY 1) AS slots,
       (SELECT count(*)::int FROM pg_publication) AS pubs, (SELECT count(*)::int FROM pg_subscription) AS subs`,
  );
  return row!;
}

const NOTHING = { slots: [], pubs: 0, subs: 0 };

/**
 * After a mover of 0/1 to b stopped: the next move takes it over once its lease lapsed, rolls it
 * back or forward and finishes; the shard's rows and every acknowledged write are at b exactly once,
 * none at a, and nothing of either move is left on the server.
 */
async function expectTakenOver(
  r: Router,
  map: Map,
  buckets: string[],
  acked: string[],
  resumed: "rolled-back" | "rolled-forward",
) {
  await untilLapsed(r);
  const result = await moveToB(r, map);
  expect(result.resumed).toBe(resumed);
  expect(r.registry.databaseOf(S.g0m1).name).toBe("b");
  expect(await r.clients.b.bucket.count({ where: { id: { in: buckets } } })).toBe(buckets.length);
  const atB = (await r.clients.b.confirmation.findMany({ select: { id: true } })).map((c) => c.id);
  expect(new Set(atB).size).toBe(atB.length); // nothing twice
  expect(atB.length).toBe(3 * buckets.length + acked.length);
  const at = new Set(atB);
  for (const id of acked) expect(at.has(id), id).toBe(true);
  expect(await r.clients.a.confirmation.count()).toBe(0);
  expect(await onServer(r)).toEqual(NOTHING);
  const view = await readPartitionMap(r.registry);
  expect([view.stopped, view.leftovers, view.issues]).toEqual([[], [], []]);
}

/** Until the move record of 0/1 on a has lapsed by a's clock. */
function untilLapsed(r: Router): Promise<void> {
  return eventually("the stopped move's lease lapses by a's clock", async () => {
    const [row] = await r.clients.a.$queryRawUnsafe<{ lapsed: boolean }[]>(
      `SELECT "expiresAt" < clock_timestamp() AS lapsed FROM "ShardMove" WHERE shard = ${S.g0m1.bits}`,
    );
    return !row || row.lapsed;
  });
}

describe("a mover of a same-server live move killed with SIGKILL", () => {
  it(
    "while its slot is being made (an open transaction elsewhere on the server holds it): the slot its orphaned statement makes later is dropped by the next mover, which moves the shard",
    async () => {
      const { r, map, buckets } = await seeded();
      const load = await writer(buckets);
      const open = await openTransaction();
      const mover = await moverWaiting(
        r,
        "the mover's slot waits for the open transaction",
        "%pg_create_logical_replication_slot(%",
        "transactionid",
      );
      mover.kill();
      expect(await mover.exited).toBe("SIGKILL");
      // The statement goes on without its client: once the transaction ends, the slot is made,
      // and nobody will use it.
      await open.end();
      await eventually(
        "the orphaned statement makes its slot",
        async () => (await onServer(r)).slots.length === 1,
      );
      await load.stop();
      // What an operator sees before the next move: the stopped move, to be undone, its slot and publication.
      await untilLapsed(r);
      const check = await checkMove({
        registry: r.registry,
        shard: S.g0m1,
        to: r.databases.b,
        tables: TABLES,
      });
      expect([check.resume, check.issues]).toEqual([
        expect.objectContaining({ target: "b", action: "undo" }),
        [],
      ]);
      const view = await readPartitionMap(r.registry);
      expect(view.leftovers.map((o) => [o.database, o.kind, o.active])).toEqual([
        ["a", "slot", false],
        ["a", "publication", undefined],
      ]);
      await expectTakenOver(r, map, buckets, load.acked, "rolled-back");
      map.close();
    },
    patient(60_000),
  );

  it(
    "after its slot is made, while CREATE SUBSCRIPTION waits: the subscription its orphaned statement makes later is dropped with its slot by the next mover",
    async () => {
      const { r, map, buckets } = await seeded();
      const load = await writer(buckets);
      const release = await holdSubscriptions();
      const mover = await moverWaiting(
        r,
        "the mover's CREATE SUBSCRIPTION waits",
        "CREATE SUBSCRIPTION%",
        "relation",
      );
      expect((await onServer(r)).slots).toHaveLength(1); // its slot is made
      mover.kill();
      expect(await mover.exited).toBe("SIGKILL");
      await release();
      await eventually(
        "the orphaned CREATE SUBSCRIPTION makes its subscription",
        async () => (await onServer(r)).subs === 1,
      );
      await load.stop();
      await expectTakenOver(r, map, buckets, load.acked, "rolled-back");
      map.close();
    },
    patient(60_000),
  );

  it.each([
    ["subscribe", "rolled-back"],
    ["copy", "rolled-back"],
    ["fence", "rolled-back"],
    ["switch", "rolled-forward"],
  ] as const)(
    "after %s: the next mover takes over (%s) and moves the shard; nothing is left on the server",
    async (stop: MoveStep, resumed) => {
      const { r, map, buckets } = await seeded();
      const load = await writer(buckets);
      const mover = await startMover(urls, { TO: "b", LEASE_MS: "1500", STOP_AFTER: stop });
      ended.push(mover.kill);
      mover.go();
      expect(await mover.exited).toBe("SIGKILL");
      await load.stop();
      await expectTakenOver(r, map, buckets, load.acked, resumed);
      map.close();
    },
    patient(60_000),
  );
});

describe("open transactions of the server while a same-server move makes its slots", () => {
  it(
    "one open in another database while its slot is made: the move waits, and goes on once it ends",
    async () => {
      const { r, map, buckets } = await seeded();
      const open = await openTransaction();
      const moving = moveToB(r, map);
      await eventually(
        "the move's slot waits for the open transaction",
        async () => (await waiting(r, "%pg_create_logical_replication_slot(%", "transactionid")) === 1,
      );
      await open.end();
      expect(await moving).toMatchObject({ from: "a", to: "b", resumed: null });
      expect(await r.clients.b.bucket.count({ where: { id: { in: buckets } } })).toBe(10);
      expect(await onServer(r)).toEqual(NOTHING);
      map.close();
    },
    patient(60_000),
  );

  it(
    "one that outlasts copyTimeoutMs: the move fails naming the transaction it waits for, is undone, and leaves no slot",
    async () => {
      const { r, map, buckets } = await seeded();
      const open = await openTransaction();
      const error = await moveToB(r, map, { copyTimeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error, String(error)).toBeInstanceOf(MoveTimeoutError);
      expect((error as MoveTimeoutError).undone).toBe(true);
      expect((error as Error).message).toMatch(
        new RegExp(
          `^shard 0/1: the copy \\(waiting for a\\): making its replication slot at a waits for these transactions of its server to end: pid ${open.pid} \\(database postgres, user postgres, idle in transaction, open for \\d+ s: .*\\) did not finish within 3000 ms; the move was undone$`,
        ),
      );
      expect(await onServer(r)).toEqual(NOTHING);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 1 } }); // a takes writes
      await open.end();
      map.close();
    },
    patient(60_000),
  );

  it(
    "one that begins after the move's slot is made holds its table copies' slots: the copy fails naming it, and the undo cancels their making (no slot left)",
    async () => {
      const { r, map } = await seeded();
      const release = await holdSubscriptions();
      let pid = 0;
      const moving = moveToB(r, map, { copyTimeoutMs: 12_000 }).catch((e: unknown) => e);
      await eventually(
        "the move's CREATE SUBSCRIPTION waits",
        async () => (await waiting(r, "CREATE SUBSCRIPTION%", "relation")) === 1,
      );
      const open = await openTransaction(); // after the move's own slot, before its table copies'
      pid = open.pid;
      await release();
      const error = await moving;
      expect(error, String(error)).toBeInstanceOf(MoveTimeoutError);
      expect((error as MoveTimeoutError).undone).toBe(true);
      expect((error as Error).message).toMatch(
        new RegExp(`waits for these transactions of its server to end: pid ${pid} \\(database postgres`),
      );
      expect(await onServer(r)).toEqual(NOTHING);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await open.end();
      map.close();
    },
    patient(60_000),
  );
});

describe("an operator who drops the move's subscription by hand", () => {
  it.each([
    ["subscribe", "copy"],
    ["copy", "catch-up"],
    ["fence", "final-position"],
  ] as const)(
    "after %s: the move stops at %s saying so (not at its timeout), is undone, and leaves nothing",
    async (after, at) => {
      const { r, map, buckets } = await seeded();
      const error = await moveToB(r, map, {
        afterStep: async (step) => {
          if (step !== after) return;
          const [sub] = await r.clients.b.$queryRawUnsafe<{ name: string }[]>(
            "SELECT subname::text AS name FROM pg_subscription WHERE subname LIKE 'shardkit_move_%'",
          );
          await r.clients.b.$executeRawUnsafe(`DROP SUBSCRIPTION "${sub!.name}"`);
        },
      }).catch((e: unknown) => e);
      expect(error, String(error)).toBeInstanceOf(MoveFailedError);
      expect(error).toMatchObject({ step: at, left: "undone", rerun: null });
      expect(((error as Error).cause as Error).message).toMatch(
        /^the move's (subscription|replication slot) shardkit_move_\S+ is gone from [ab] \(dropped by hand\?\)/,
      );
      expect(await onServer(r)).toEqual(NOTHING);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 1 } }); // a takes writes
      expect(await moveToB(r, map)).toMatchObject({ from: "a", to: "b" }); // and the shard moves again
      map.close();
    },
    patient(60_000),
  );
});
