import { spawn } from "node:child_process";
import { SpanStatusCode } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { ShardedId } from "@shardkit/id";
import { consumeOnce, emitEvent, idempotent } from "@shardkit/prisma";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { reset, type router, routers, S } from "../test/world.js";
import { MovePrecheckError, MoveVerifyError } from "./errors.js";
import { type MoveStep, moveShard, moveSteps } from "./move.js";

// Live moves between two PostgreSQL servers with wal_level = logical (the global setup makes them).
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => reset(urls));

const quiet = () => {};

/** Buckets on `shard`, each with a few confirmations, written through the routed client. */
async function seed(r: ReturnType<typeof router>, shard = S.g0m1, buckets = 50) {
  const ids: string[] = [];
  for (let i = 0; i < buckets; i++) {
    const id = ShardedId.generate("Bucket", shard);
    await r.db.bucket.create({ data: { id, name: `B-${i}`, remaining: 100 } });
    for (let c = 0; c < 3; c++) {
      await r.db.confirmation.create({
        data: { id: ShardedId.colocatedWith("Confirmation", id), bucketId: id, desk: "seed" },
      });
    }
    ids.push(id);
  }
  return ids;
}

/** What replication left on the servers: slots, publications, subscriptions of shardkit moves. */
async function leftovers(r: ReturnType<typeof router>) {
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

/** Every step a move can stop after (crash tests stop after each one). */
const STOPS: MoveStep[] = [
  "receive",
  "publish",
  "subscribe",
  "copy",
  "catch-up",
  "fence",
  "final-position",
  "verify",
  "switch",
  "enforce",
  "teardown",
];

/** How many of a and e record shard 0/1 as owned. */
async function ownersOf(r: ReturnType<typeof router>): Promise<number> {
  const owners = await Promise.all(
    [r.clients.a, r.clients.e].map((c) =>
      c.$queryRawUnsafe<{ state: string }[]>(
        `SELECT state FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`,
      ),
    ),
  );
  return owners.filter((rows) => rows[0]?.state === "owned").length;
}

/**
 * After a move of 0/1 (10 buckets, 3 confirmations each) stopped after `stop`: running it again
 * rolls it forward or back as it should and finishes it, the data intact at e, nothing left at a,
 * no replication left behind, and e takes the shard's writes.
 */
async function expectMoveFinished(
  r: ReturnType<typeof router>,
  map: Awaited<ReturnType<ReturnType<typeof router>["open"]>>,
  stop: MoveStep,
  buckets: string[],
) {
  const result = await moveShard({
    map,
    shard: S.g0m1,
    to: r.physical.e,
    sourceConnection: urls.a,
    onProgress: quiet,
  });
  expect(result.resumed).toBe(
    ["switch", "enforce", "teardown"].includes(stop) ? "rolled-forward" : "rolled-back",
  );
  expect(r.registry.physicalOf(S.g0m1).name).toBe("e");
  expect(await r.clients.e.bucket.count({ where: { id: { in: buckets } } })).toBe(10);
  expect(await r.clients.e.confirmation.count()).toBe(30);
  expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0);
  expect(await leftovers(r)).toEqual({ slots: 0, publications: [0, 0], subscriptions: [0, 0] });
  await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 7 } });
  expect((await r.clients.e.bucket.findUnique({ where: { id: buckets[0]! } }))?.remaining).toBe(7);
}

describe("moveShard (live, PostgreSQL logical replication)", () => {
  it("moves a shard while it takes writes: every acknowledged write is at the new owner exactly once, other shards unaffected, nothing left behind", async () => {
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
        await new Promise((resolve) => setTimeout(resolve, 4)); // a bounded load, not a flood
      }
    };
    const writers = [writer(buckets, "moving"), writer(buckets, "moving-2"), writer(other, "other")];
    const steps: MoveStep[] = [];
    const result = await moveShard({
      map,
      shard: S.g0m1,
      to: r.physical.e,
      sourceConnection: urls.a,
      onProgress: (p) => steps.push(p.step),
    });
    writing = false;
    await Promise.all(writers);

    expect(failures).toEqual([]);
    expect(result).toMatchObject({ shard: "0/1", from: "a", to: "e", epoch: 2, mode: "live", resumed: null });
    expect(result.rows.Bucket).toBe(50);
    expect(result.freezeMs).toBeGreaterThan(0);
    // Each step reported as it starts (copy and catch-up report again with their progress).
    expect(steps.filter((step, k) => step !== steps[k - 1])).toEqual([
      "precheck",
      "receive",
      "publish",
      "subscribe",
      "copy",
      "catch-up",
      "fence",
      "final-position",
      "verify",
      "switch",
      "enforce",
      "teardown",
      "cleanup",
      "done",
    ]);
    // What a progress bar counts on (`moveSteps`) is what a move reports.
    expect(steps.filter((step, k) => step !== steps[k - 1])).toEqual(moveSteps("live"));
    // Nothing lost, nothing applied twice: every acknowledged confirmation is at its shard's owner, once.
    const atOwner = new Set([
      ...(await r.clients.e.confirmation.findMany({ select: { id: true } })).map((c) => c.id),
      ...(await r.clients.a.confirmation.findMany({ select: { id: true } })).map((c) => c.id),
    ]);
    for (const id of acked) expect(atOwner.has(id), id).toBe(true);
    expect(await r.clients.e.confirmation.count()).toBe(
      150 + [...acked].filter((id) => r.registry.physicalOf(id).name === "e").length,
    );
    expect(await r.clients.a.bucket.count({ where: { id: { in: buckets } } })).toBe(0); // the old copy, cleaned up
    expect(r.registry.physicalOf(S.g0m1).name).toBe("e");
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
    for (const table of ["OutboxEvent", "IdempotencyKey", "ProcessedEvent"]) {
      const [left] = await r.clients.a.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM "${table}"`,
      );
      expect(left!.n, table).toBe(0);
    }
    expect(await leftovers(r)).toEqual({ slots: 0, publications: [0, 0], subscriptions: [0, 0] });
    map.close();
  }, 120_000);

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
      const error = await moveShard({
        map,
        shard: S.g0m1,
        to: r.physical.e,
        sourceConnection: urls.a,
        onProgress: quiet,
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(MovePrecheckError);
      const issues = (error as MovePrecheckError).issues.join("\n");
      expect(issues).toMatch(/e: already holds 1 rows of shard 0\/1/);
      expect(issues).toMatch(/Confirmation: the target's columns .* differ from the source's/);
      expect(await leftovers(r)).toEqual({ slots: 0, publications: [0, 0], subscriptions: [0, 0] });
      expect(r.registry.physicalOf(S.g0m1).name).toBe("a");
      await r.db.bucket.update({ where: { id: bucket! }, data: { remaining: 1 } }); // still served at a
    } finally {
      await r.clients.e.$executeRawUnsafe(`ALTER TABLE "Confirmation" DROP COLUMN note`);
    }
    map.close();
  });

  it.each(STOPS)(
    "a move that stops after %s leaves one writer (or none while fenced), and running it again finishes it",
    async (stop) => {
      const r = make();
      const map = await r.open({ retries: 1 });
      const buckets = await seed(r, S.g0m1, 10);
      const crash = new Error(`stopped after ${stop}`);
      const stopped = await moveShard({
        map,
        shard: S.g0m1,
        to: r.physical.e,
        sourceConnection: urls.a,
        onProgress: quiet,
        afterStep: (step) => {
          if (step === stop) throw crash;
        },
      }).catch((e: unknown) => e);
      expect(stopped).toBe(crash);
      // Exactly one database takes the shard's writes, or none between the fence and the switch.
      const owned = await ownersOf(r);
      expect(owned).toBeLessThanOrEqual(1);
      if (!["fence", "final-position", "verify"].includes(stop)) expect(owned).toBe(1);
      await expectMoveFinished(r, map, stop, buckets);
      map.close();
    },
    60_000,
  );
});

describe("a mover process killed with SIGKILL", () => {
  it.each(STOPS)(
    "after %s: one writer at most, and the next moveShard finishes the move",
    async (stop) => {
      const r = make();
      const map = await r.open();
      const buckets = await seed(r, S.g0m1, 10);
      const child = spawn(process.execPath, ["--import", "tsx", "test/mover.ts"], {
        cwd: new URL("..", import.meta.url).pathname,
        env: { ...process.env, MOVE_URLS: JSON.stringify(urls), STOP_AFTER: stop },
        stdio: ["ignore", "pipe", "inherit"],
      });
      let output = "";
      child.stdout!.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      const signal = await new Promise<NodeJS.Signals | null>((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill("SIGKILL");
          reject(new Error(`the mover did not stop after ${stop} within 60 s`));
        }, 60_000);
        child.on("exit", (_code, sig) => {
          clearTimeout(timer);
          resolve(sig);
        });
      });
      expect([signal, output]).toEqual(["SIGKILL", ""]);
      expect(await ownersOf(r)).toBeLessThanOrEqual(1);
      await expectMoveFinished(r, map, stop, buckets);
      map.close();
    },
    90_000,
  );
});

describe("moveShard (offline)", () => {
  it("fences, copies, verifies and switches; a copy that does not match is undone and the source owns the shard again", async () => {
    const r = make();
    const map = await r.open();
    const buckets = await seed(r, S.g0m1, 20);
    const exporter = new InMemorySpanExporter();
    const telemetry = {
      tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    };
    const spoiled = await moveShard({
      map,
      shard: S.g0m1,
      to: r.physical.e,
      mode: "offline",
      telemetry,
      onProgress: quiet,
      afterStep: async (step) => {
        if (step === "copy") {
          await map.asMover(r.physical.e, (tx) =>
            tx.$executeRawUnsafe(`UPDATE "Bucket" SET remaining = 0 WHERE id = $1::uuid`, buckets[0]),
          );
        }
      },
    }).catch((e: unknown) => e);
    expect(spoiled).toBeInstanceOf(MoveVerifyError);
    expect((spoiled as MoveVerifyError).mismatches[0]).toMatch(/^Bucket: source 20 rows/);
    expect(r.registry.physicalOf(S.g0m1).name).toBe("a");
    expect(await r.clients.e.bucket.count()).toBe(0);
    await r.db.bucket.update({ where: { id: buckets[0]! }, data: { remaining: 5 } }); // a takes writes again

    const result = await moveShard({
      map,
      shard: S.g0m1,
      to: r.physical.e,
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
    expect(steps).toEqual(expect.arrayContaining(["precheck", "fence", "copy", "verify", "switch", "done"]));
    expect(steps.filter((step, k) => step !== steps[k - 1])).toEqual(moveSteps("offline"));
    expect((await r.clients.e.bucket.findUnique({ where: { id: buckets[0]! } }))?.remaining).toBe(5);
    map.close();
  }, 60_000);
});

describe("moveSteps", () => {
  it("the steps a move reports, for the bar's total", () => {
    expect(moveSteps("offline")).toEqual([
      "precheck",
      "receive",
      "fence",
      "copy",
      "verify",
      "switch",
      "enforce",
      "teardown",
      "cleanup",
      "done",
    ]);
    expect(moveSteps("live", { verify: false, cleanup: false })).toHaveLength(12);
  });
});
