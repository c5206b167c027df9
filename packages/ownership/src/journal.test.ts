import { PGlite } from "@electric-sql/pglite";
import { ShardedId } from "@shardkit/id";
import { createShardRegistry } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { routedClient, seedBuckets } from "../test/layout.js";
import { startMover } from "../test/movers.js";
import { reset, type router, routers, S, TABLES } from "../test/world.js";
import { MoveFailedError } from "./errors.js";
import { MOVE_JOURNAL_TABLE, type MoveJournalEntry, MoveJournalWriter, readMoveJournal } from "./journal.js";
import { PartitionMap } from "./map.js";
import { type MoveStep, moveShard, moveSteps } from "./move.js";

// Moves between two PostgreSQL servers with wal_level = logical (the global setup makes them); the
// journal is read from another router (its own clients), as a dashboard in another process would.
const urls = inject("moveUrls");
const make = routers(urls);
const killed: (() => void)[] = [];
beforeEach(async () => {
  await reset(urls);
  // Each test starts without a journal: the first move's write makes it.
  const r = make();
  for (const client of Object.values(r.clients))
    await client.$executeRawUnsafe(`DROP TABLE IF EXISTS ${MOVE_JOURNAL_TABLE}`);
});
afterEach(() => {
  for (const kill of killed.splice(0)) kill();
});

type Router = ReturnType<typeof router>;
const quiet = () => {};

/** A router over the emptied databases, its partition map, and `n` buckets (3 confirmations each) on 0/1. */
async function seeded(n: number) {
  const r = make();
  const map = await r.open();
  const buckets = await seedBuckets(r.db, S.g0m1, n);
  return { r, map, buckets };
}

/** A move of 0/1 from a to e, quietly (`more`: its mode, holder, hooks). */
const moveToE = (
  r: Router,
  map: Awaited<ReturnType<Router["open"]>>,
  more: Omit<Parameters<typeof moveShard>[0], "map" | "shard" | "to"> = {},
) => moveShard({ map, shard: S.g0m1, to: r.databases.e, onProgress: quiet, ...more });

/** A pause of a move after `at`: `reached` resolves there, the move goes on at `go()`. */
function pauseAfter(at: MoveStep) {
  let reach!: () => void;
  let go!: () => void;
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const released = new Promise<void>((resolve) => {
    go = resolve;
  });
  return {
    reached,
    go,
    afterStep: async (step: MoveStep) => {
      if (step !== at) return;
      reach();
      await released;
    },
  };
}

/** The journal's entries of shard 0/1, as another process reads them. */
async function entriesOf(reader: Router): Promise<MoveJournalEntry[]> {
  const journal = await readMoveJournal(reader.registry);
  expect(journal.unanswered).toEqual([]);
  return journal.entries.filter((e) => e.shard === "0/1");
}

describe("the move journal (PostgreSQL)", () => {
  it(
    "shows a live move under way at the step it is paused at, with its rows and lag, then its end: moved, with its freeze",
    async () => {
      const { r, map } = await seeded(10);
      const reader = make();
      const pause = pauseAfter("catch-up");
      const moving = moveToE(r, map, {
        sourceConnection: urls.a,
        holder: "journal-test",
        afterStep: pause.afterStep,
      });
      await pause.reached;
      const steps = moveSteps("live");
      let seen: MoveJournalEntry | undefined;
      await eventually("the journal shows the move at catch-up", async () => {
        [seen] = await entriesOf(reader);
        return seen?.step === "catch-up";
      });
      expect(seen).toMatchObject({
        database: "a",
        shard: "0/1",
        from: "a",
        to: "e",
        mode: "live",
        stepIndex: steps.indexOf("catch-up"),
        steps: steps.length,
        rows: 40, // 10 buckets and their 30 confirmations, copied
        holder: "journal-test",
        endedAt: null,
        outcome: null,
        freezeMs: null,
        error: null,
        stopped: false,
      });
      expect(seen!.lagBytes).toBeGreaterThanOrEqual(0);
      expect(seen!.startedAt.getTime()).toBeLessThanOrEqual(seen!.updatedAt.getTime());
      pause.go();
      const result = await moving;

      // Its end was written before the move returned.
      const [ended, ...others] = await entriesOf(reader);
      expect(others).toEqual([]);
      expect(ended).toMatchObject({
        attempt: seen!.attempt,
        step: "done",
        stepIndex: steps.length - 1,
        outcome: "moved",
        freezeMs: result.freezeMs,
        durationMs: result.durationMs,
        rows: 40,
        lagBytes: null,
        error: null,
        endedBy: null,
        stopped: false,
      });
      expect(ended!.freezeMs).toBeGreaterThanOrEqual(0);
      expect(ended!.endedAt).toBeInstanceOf(Date);
      map.close();
    },
    patient(120_000),
  );

  it(
    "a move that fails and is undone ends 'undone' with its error; the move throws the error it always did",
    async () => {
      const { r, map } = await seeded(3);
      const reader = make();
      const failure = await moveToE(r, map, {
        mode: "offline",
        afterStep: (step) => {
          if (step === "verify") throw new Error("the mover's host went away after verify");
        },
      }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(MoveFailedError);
      expect(failure).toMatchObject({ step: "verify", left: "undone", rerun: null });
      expect((failure as Error).message).toMatch(
        /failed at verify \(the mover's host went away after verify\)\. It was undone: a owns the shard/,
      );
      const [entry, ...others] = await entriesOf(reader);
      expect(others).toEqual([]);
      expect(entry).toMatchObject({
        mode: "offline",
        step: "verify",
        stepIndex: moveSteps("offline").indexOf("verify"),
        outcome: "undone",
        error: (failure as Error).message,
        freezeMs: null,
        stopped: false,
      });
      expect(entry!.durationMs).toBeGreaterThanOrEqual(0);
      expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
      map.close();
    },
    patient(60_000),
  );

  it(
    "a mover that dies mid-move leaves its entry open and stopped; the next move ends it with what it did, and writes its own",
    async () => {
      const { r, map } = await seeded(3);
      const reader = make();
      const mover = await startMover(urls, { PAUSE_AFTER: "copy", LEASE_MS: "1500" });
      killed.push(mover.kill);
      mover.go();
      expect(await mover.next()).toBe("paused copy");
      await eventually("the journal shows the mover at copy", async () => {
        const [entry] = await entriesOf(reader);
        return entry?.step === "copy" && entry.rows === 12;
      });
      mover.kill();
      expect(await mover.exited).toBe("SIGKILL");
      await eventually("its lease lapses", async () => (await entriesOf(reader))[0]?.stopped === true);
      const [stopped] = await entriesOf(reader);
      expect(stopped).toMatchObject({ holder: `mover ${mover.pid}`, outcome: null, endedAt: null });

      const result = await moveToE(r, map, {
        sourceConnection: urls.a,
        holder: "the next mover",
      });
      expect(result.resumed).toBe("rolled-back");
      const entries = await entriesOf(reader);
      expect(entries.map((e) => [e.holder, e.outcome, e.endedBy, e.stopped])).toEqual([
        ["the next mover", "moved", null, false],
        [`mover ${mover.pid}`, "undone", "the next mover", false],
      ]);
      expect(entries[0]!.attempt).not.toBe(entries[1]!.attempt);
      map.close();
    },
    patient(120_000),
  );

  it(
    "a database without the journal has no entries; one whose journal cannot be read is unanswered, and a move there is not failed by its journal",
    async () => {
      const { r, map } = await seeded(2);
      const reader = make();
      expect(await readMoveJournal(reader.registry)).toEqual({ entries: [], unanswered: [] });

      // A table of that name the journal cannot write (other columns): the move goes on without it.
      await r.clients.a.$executeRawUnsafe("CREATE SCHEMA IF NOT EXISTS shardkit");
      await r.clients.a.$executeRawUnsafe(`CREATE TABLE ${MOVE_JOURNAL_TABLE} (x integer)`);
      const result = await moveToE(r, map, { mode: "offline" });
      expect(result.rows).toMatchObject({ Bucket: 2, Confirmation: 6 });
      const journal = await readMoveJournal(reader.registry);
      expect(journal.entries).toEqual([]);
      expect(journal.unanswered.map((u) => u.database)).toEqual(["a"]);
      expect(journal.unanswered[0]!.error).toMatch(/column|does not exist/);
      map.close();
    },
    patient(60_000),
  );

  it("movers ending at once on a database without the journal make it once between them, and every one's entry is written", async () => {
    // Eight movers, each with its own clients (as eight processes would have).
    const writers = Array.from({ length: 8 }, () => make()).map(
      (r, i) =>
        new MoveJournalWriter(
          {
            shard: S.g0m1,
            attempt: `attempt-${i}`,
            holder: `mover ${i}`,
            from: r.databases.a,
            to: r.databases.e,
          },
          { mode: "offline", cleanup: true, started: performance.now() - 1000 + i, copyTimeoutMs: 30_000 },
        ),
    );
    await Promise.all(
      writers.map((w) => w.end({ outcome: "moved", freezeMs: 1, durationMs: 1000, rows: 0 })),
    );
    const entries = await entriesOf(make());
    expect(entries.map((e) => [e.attempt, e.outcome])).toEqual(
      writers.map((_, i) => [`attempt-${7 - i}`, "moved"]),
    );
  });

  it("keeps the newest 500 ended moves of a database, and every move under way", async () => {
    const r = make();
    const writer = (attempt: string, started: number) =>
      new MoveJournalWriter(
        { shard: S.g0m1, attempt, holder: "h", from: r.databases.a, to: r.databases.e },
        { mode: "offline", cleanup: true, started, copyTimeoutMs: 30_000 },
      );
    await writer("first", performance.now()).end({ outcome: "moved", durationMs: 1 }); // makes the table
    // 520 older ended moves and one under way, as earlier movers left them.
    await r.clients.a.$executeRawUnsafe(
      `INSERT INTO ${MOVE_JOURNAL_TABLE} (shard, attempt, source, target, mode, step, step_index, steps, holder, started_at, updated_at, ended_at, outcome)
       SELECT 1, 'old-' || i, 'a', 'e', 'offline', 'done', 8, 9, 'h', now() - interval '1 day', now() - interval '1 day',
         now() - interval '1 day' + i * interval '1 second', 'moved'
       FROM generate_series(1, 520) AS i
       UNION ALL SELECT 1, 'open', 'a', 'e', 'offline', 'copy', 4, 9, 'h', now() - interval '2 days', now(), NULL, NULL`,
    );
    await writer("last", performance.now()).end({ outcome: "undone", durationMs: 1, error: new Error("no") });
    const rows = await r.clients.a.$queryRawUnsafe<{ attempt: string }[]>(
      `SELECT attempt FROM ${MOVE_JOURNAL_TABLE} ORDER BY ended_at DESC NULLS LAST`,
    );
    expect(rows.length).toBe(501);
    expect(rows.slice(0, 3).map((x) => x.attempt)).toEqual(["last", "first", "old-520"]);
    expect(rows.at(-2)!.attempt).toBe("old-23"); // the 498 newest old ones stay, with first and last
    expect(rows.at(-1)!.attempt).toBe("open");
    const { entries } = await readMoveJournal(r.registry, { limit: 2 });
    expect(entries.map((e) => e.attempt)).toEqual(["last", "first"]);
  });

  it("a source that never answers: the move's last write gives up at its bound, and nothing is thrown", async () => {
    const r = make();
    const never = { $executeRawUnsafe: () => new Promise<number>(() => {}) };
    const hanging = { ...r.databases.a, client: never } as unknown as typeof r.databases.a;
    const writer = new MoveJournalWriter(
      { shard: S.g0m1, attempt: "hangs", holder: "h", from: hanging, to: r.databases.e },
      { mode: "offline", cleanup: true, started: performance.now(), copyTimeoutMs: 200 },
    );
    writer.report("lease");
    writer.report("copy", { rows: 3 });
    await expect(writer.end({ outcome: "moved", durationMs: 1 })).resolves.toBeUndefined();
  });

  it("refuses options that cannot work", async () => {
    const reader = make();
    await expect(readMoveJournal(reader.registry, { timeoutMs: 0, limit: 1.5 })).rejects.toThrow(
      /timeoutMs: expected a number >= 1, got 0.*limit: expected an integer >= 1, got 1.5/s,
    );
  });
});

describe("the move journal (embedded PGlite)", () => {
  it(
    "an offline move's journal on the source; a spare without one reads as no entries",
    async () => {
      const dbs = [new PGlite(), new PGlite()];
      await rolloutSchema({
        schema: new URL("../test/schema.prisma", import.meta.url).pathname,
        targets: dbs.map((db, i) => ({ name: `pglite-${i}`, adapter: new PrismaPGlite(db) })),
        onProgress: () => {},
      });
      const clients = dbs.map((db) => new PrismaClient({ adapter: new PrismaPGlite(db) }));
      const registry = createShardRegistry({
        shards: [{ shard: S.g0m1, client: clients[0]! }],
        databases: [
          { client: clients[0]!, name: "one" },
          { client: clients[1]!, name: "spare" },
        ],
      });
      const map = await PartitionMap.open({ registry, tables: TABLES });
      const db = routedClient(registry);
      await db.bucket.create({ data: { id: ShardedId.generate("Bucket", S.g0m1), name: "B", remaining: 1 } });
      const spare = registry.databases.find((p) => p.name === "spare")!;
      expect(await readMoveJournal(registry)).toEqual({ entries: [], unanswered: [] });
      const result = await moveShard({ map, shard: S.g0m1, to: spare, mode: "offline", onProgress: quiet });
      const journal = await readMoveJournal(registry);
      expect(journal.unanswered).toEqual([]);
      expect(journal.entries).toEqual([
        expect.objectContaining({
          database: "one",
          from: "one",
          to: "spare",
          outcome: "moved",
          rows: 1,
          freezeMs: result.freezeMs,
        }),
      ]);
      map.close();
      for (const pglite of dbs) await pglite.close();
    },
    patient(60_000),
  );
});
