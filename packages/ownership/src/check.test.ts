import { ShardedId } from "@shardkit/id";
import { patient, withClusterStopped } from "@shardkit/test-db";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { startMover } from "../test/movers.js";
import { reset, type router, routers, S, TABLES } from "../test/world.js";
import { checkMove } from "./check.js";
import { DatabasesUnansweredError, MovePrecheckError, OwnershipOptionsError } from "./errors.js";
import { moveShard } from "./move.js";

/** The second server, which these tests stop: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

// Live-capable databases (wal_level = logical) for most checks; the machine's server (replica) for wal_level.
const moveUrls = inject("moveUrls");
const plainUrls = inject("ownershipUrls");
const make = routers(moveUrls);
beforeEach(async () => {
  await reset(moveUrls);
  await reset(plainUrls);
});

/** The live move of 0/1 from a to e that a check is about, quietly. */
const liveMoveToE = (
  r: ReturnType<typeof router>,
  map: Awaited<ReturnType<ReturnType<typeof router>["open"]>>,
) => moveShard({ map, shard: S.g0m1, to: r.databases.e, sourceConnection: moveUrls.a, onProgress: () => {} });

/** The check of a move of 0/1 to database `to`, with the move's options a test sets beyond these. */
const checkMoveTo = (
  r: ReturnType<typeof router>,
  to: "a" | "b" | "e",
  more: { mode?: "live" | "offline"; timeoutMs?: number } = {},
) => checkMove({ registry: r.registry, shard: S.g0m1, to: r.databases[to], tables: TABLES, ...more });

/** What a check must not change: ownership and move records, anywhere. */
async function recorded(r: ReturnType<typeof router>) {
  const counts = await Promise.all(
    Object.values(r.clients).map((c) =>
      c.$queryRawUnsafe<{ n: number }[]>(
        `SELECT (SELECT count(*) FROM "ShardOwnership") + (SELECT count(*) FROM "ShardMove")::int AS n`,
      ),
    ),
  );
  return counts.map((c) => Number(c[0]!.n));
}

describe("checkMove", () => {
  it("a move that can start: no issues, the shard's owner as its source, and nothing recorded anywhere", async () => {
    const r = make();
    await r.db.bucket.create({ data: { id: ShardedId.generate("Bucket", S.g0m1), name: "B", remaining: 1 } });
    const check = await checkMove({ registry: r.registry, shard: "0/1", to: r.databases.e, tables: TABLES });
    expect([check.shard, check.from?.name, check.to.name, check.mode, check.issues]).toEqual([
      S.g0m1,
      "a",
      "e",
      "live",
      [],
    ]);
    expect([check.owner.state, check.owner.owner, check.owner.configured.name]).toEqual([
      "unrecorded",
      null,
      "a",
    ]);
    expect(await recorded(r)).toEqual([0, 0, 0]);
    // With a map open, the owner comes from the records.
    const map = await r.open();
    const again = await checkMoveTo(r, "e");
    expect([again.from?.name, again.issues]).toEqual(["a", []]);
    expect([again.owner.owner?.name, again.owner.state, again.owner.epoch]).toEqual(["a", "owned", 1]);
    map.close();
  });

  it("wal_level not logical: a live move's issue, not an offline one's", async () => {
    const r = make(plainUrls);
    const live = await checkMoveTo(r, "e");
    expect(live.issues).toEqual([
      "a: wal_level is replica; a live move needs wal_level = logical (or use mode: 'offline')",
    ]);
    const offline = await checkMoveTo(r, "e", { mode: "offline" });
    expect(offline.issues).toEqual([]);
  });

  it("every replication slot of the source taken: a live move's issue, named before anything starts", async () => {
    const r = make();
    const [{ free }] = await r.clients.a.$queryRawUnsafe<[{ free: number }]>(
      "SELECT current_setting('max_replication_slots')::int - (SELECT count(*)::int FROM pg_replication_slots) AS free",
    );
    const names = Array.from({ length: free }, (_, i) => `sk_check_taken_${i}`);
    try {
      for (const name of names)
        await r.clients.a.$queryRawUnsafe(`SELECT 1 FROM pg_create_physical_replication_slot('${name}')`);
      const check = await checkMoveTo(r, "b");
      expect(check.issues).toEqual([
        expect.stringMatching(
          /^a: all \d+ replication slots are taken \(max_replication_slots\); a live move needs one$/,
        ),
      ]);
    } finally {
      for (const name of names)
        await r.clients.a
          .$queryRawUnsafe(`SELECT 1 FROM pg_drop_replication_slot('${name}')`)
          .catch(() => {});
    }
    // Two databases of one server are no issue: the move makes its slot apart.
    const check = await checkMoveTo(r, "b");
    expect(check.issues).toEqual([]);
  });

  it("a table missing at the target and leftover rows of the shard there: each named; moveShard refuses with the same issues", async () => {
    const r = make();
    await r.clients.e.$executeRawUnsafe(
      `INSERT INTO "Bucket" (id, name, remaining) VALUES ($1::uuid, 'leftover', 1), ($2::uuid, 'leftover', 1)`,
      ShardedId.generate("Bucket", S.g0m1),
      ShardedId.generate("Bucket", S.g0m1),
    );
    await r.clients.e.$executeRawUnsafe(`ALTER TABLE "Confirmation" RENAME TO "ConfirmationAway"`);
    try {
      const check = await checkMoveTo(r, "e");
      expect(check.issues).toEqual([
        "e: table Confirmation does not exist (roll the schema out to it first)",
        "e: already holds 2 rows of shard 0/1 (a leftover copy: remove it first)",
      ]);
      expect(await recorded(r)).toEqual([0, 0, 0]);
      // One mechanism: the move runs the same checks and refuses with the same issues.
      const map = await r.open();
      const error = await liveMoveToE(r, map).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MovePrecheckError);
      expect((error as MovePrecheckError).issues).toEqual(check.issues);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      map.close();
    } finally {
      await r.clients.e.$executeRawUnsafe(`ALTER TABLE "ConfirmationAway" RENAME TO "Confirmation"`);
    }
  });

  it.each([
    ["copy", "undo", "copying"],
    ["switch", "finish", "switched"],
  ] as const)(
    "a mover killed after %s: while its lease is live the check names the holder (the move would be refused); once it lapsed, it says moveShard will %s it first and finds nothing else in the way",
    async (stop, action, reached) => {
      const r = make();
      const map = await r.open();
      const buckets = Array.from({ length: 5 }, () => ShardedId.generate("Bucket", S.g0m1));
      for (const id of buckets) await r.db.bucket.create({ data: { id, name: `B-${id}`, remaining: 1 } });
      const mover = await startMover(moveUrls, { STOP_AFTER: stop, LEASE_MS: "60000" });
      mover.go();
      expect(await mover.exited).toBe("SIGKILL");
      expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(5); // the copy is there
      const live = await checkMoveTo(r, "e");
      expect(live.resume).toBe(null);
      expect(live.issues).toEqual([
        expect.stringMatching(
          new RegExp(
            `^a move of shard 0/1 to e is under way: mover ${mover.pid} holds its lease \\(step ${reached}; it lapses in \\d+\\.\\d s unless renewed\\)$`,
          ),
        ),
      ]);
      // The lease lapses (its holder died): a minute is long, so it is made to lapse now, by the database's clock.
      await r.clients.a.$executeRawUnsafe(
        `UPDATE "ShardMove" SET "expiresAt" = clock_timestamp() - interval '1 second'`,
      );
      const check = await checkMoveTo(r, "e");
      expect(check.resume).toEqual({ target: "e", step: reached, holder: `mover ${mover.pid}`, action });
      expect(check.issues).toEqual([]);
      expect(check.from?.name).toBe(action === "finish" ? "e" : "a");
      // The check was right: the move goes through, finishing or undoing the stopped one first.
      const result = await liveMoveToE(r, map);
      expect(result.resumed).toBe(action === "finish" ? "rolled-forward" : "rolled-back");
      expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
      expect((await checkMoveTo(r, "a")).resume).toBe(null);
      map.close();
    },
    patient(120_000),
  );

  it(
    "a target that is down is an issue, not a failure; the move itself refuses the same way, naming it, and changes nothing",
    async () => {
      const r = make(plainUrls); // e is on the second server
      const map = await r.open({ timeoutMs: patient(3000) });
      const [check, move] = await withClusterStopped(SECOND.cluster, SECOND.port, async () => [
        await checkMoveTo(r, "e", { mode: "offline", timeoutMs: patient(3000) }),
        await moveShard({
          map,
          shard: S.g0m1,
          to: r.databases.e,
          mode: "offline",
          onProgress: () => {},
        }).catch((e: unknown) => e),
      ]);
      expect(check.from?.name).toBe("a");
      expect(check.issues).toHaveLength(1);
      expect(check.issues[0]).toMatch(/^e: did not answer \(.+\)$/);
      expect(move).toBeInstanceOf(DatabasesUnansweredError);
      expect((move as DatabasesUnansweredError).databases.map((d) => d.database)).toEqual(["e"]);
      expect((move as Error).message).toMatch(
        /^shard 0\/1 cannot move: databases it needs did not answer within \d+ ms \(nothing was changed\): e \(/,
      );
      expect(await recorded(r)).toEqual([2, 1, 0]); // the map's records at a (0/0, 0/1) and b (1/0): no move recorded
      map.close();
    },
    patient(60_000),
  );

  it("options that cannot work, and a move to the shard's owner, are OwnershipOptionsError (as moveShard's)", async () => {
    const r = make();
    const base = { registry: r.registry, shard: S.g0m1, to: r.databases.e, tables: TABLES };
    const bad = [
      { ...base, shard: "x/y" },
      { ...base, shard: "9/9" },
      { ...base, shard: undefined as never, tables: [] },
      { ...base, tables: [] },
      { ...base, mode: "sideways" as never },
      { ...base, to: undefined as never },
      { ...base, to: r.databases.a },
    ];
    for (const options of bad) {
      await expect(checkMove(options)).rejects.toBeInstanceOf(OwnershipOptionsError);
    }
    await expect(checkMove({ ...base, to: r.databases.a })).rejects.toThrow("a already owns shard 0/1");
  });
});
