import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { patient, withClusterFrozen, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { walletOf } from "../test/layout.js";
import { makeWorld, S } from "../test/world.js";
import { DatabaseTimeoutError, IdempotencyConflictError, PartialCommitError } from "./errors.js";
import { consumeOnce, idempotent } from "./idempotency.js";
import { emitEvent, type OutboxMessage } from "./outbox.js";
import { createShardRegistry } from "./registry.js";
import { createOutboxRelay } from "./relay/relay.js";
import { isShardUnavailable } from "./unavailable.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const world = makeWorld();
const { db, clients, registry } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const customer = (shard = S.g1m1) => ({ id: ShardedId.generate("Customer", shard), name: "c", region: "x" });
const outboxRows = async () =>
  (
    await Promise.all(
      Object.values(clients).map((c) => c.outboxEvent.findMany({ orderBy: { createdAt: "asc" } })),
    )
  ).flat();

describe("outbox: events commit with the state, in one shard transaction", () => {
  it("the schema snippet users paste is the one the tests run on", () => {
    const snippet = readFileSync(new URL("../schema/shardkit.prisma", import.meta.url), "utf8");
    expect(readFileSync(new URL("../test/schema.prisma", import.meta.url), "utf8")).toContain(snippet);
  });

  it("an action's emitted event is written with its state, on its shard", async () => {
    const c = customer();
    await db.$action((unit) => {
      unit.create("customer", { data: c });
      unit.emit(c.id, {
        topic: "customer.created",
        aggregateId: c.id,
        payload: { name: c.name, credit: 10n ** 20n },
      });
    });
    const rows = await clients.c.outboxEvent.findMany();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      topic: "customer.created",
      aggregateId: c.id,
      status: "pending",
      attempts: 0,
    });
    expect(ShardedId.shardOf(rows[0]!.id)).toBe(S.g1m1);
  });

  it("no event survives a rolled-back shard transaction", async () => {
    const c = customer(S.g0m0);
    const orphan = ShardedId.generate("Customer", S.g1m2);
    const error = await db
      .$action(
        (unit) => {
          unit.create("customer", { data: c });
          unit.emit(c.id, { topic: "customer.created", aggregateId: c.id, payload: {} });
          unit.create("wallet", walletOf(orphan));
          unit.emit(orphan, { topic: "wallet.opened", aggregateId: orphan, payload: {} });
        },
        { allowCrossShard: true },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialCommitError);
    expect((await outboxRows()).map((r) => r.topic)).toEqual(["customer.created"]);
  });

  it("emitEvent writes inside $transactionOn and rolls back with it", async () => {
    const c = customer(S.g0m2);
    await db.$transactionOn(c.id, async (tx) => {
      await tx.customer.create({ data: c });
      await emitEvent(tx, c.id, { topic: "a", aggregateId: c.id, payload: 1 });
    });
    await expect(
      db.$transactionOn(c.id, async (tx) => {
        await emitEvent(tx, c.id, { topic: "b", aggregateId: c.id, payload: 2 });
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    expect((await outboxRows()).map((r) => r.topic)).toEqual(["a"]);
  });
});

describe("relay", () => {
  async function seed(n: number, shards = Object.values(S)) {
    for (let i = 0; i < n; i++) {
      const shard = shards[i % shards.length]!;
      const aggregateId = ShardedId.generate("Customer", shard);
      await db.$action((unit) => {
        unit.emit(shard, { topic: "t", aggregateId, payload: { i, amount: BigInt(i) } });
      });
    }
  }

  it("delivers every pending event once, from every database in one poll, payload decoded", async () => {
    await seed(12);
    const seen: OutboxMessage[] = [];
    const relay = createOutboxRelay({ registry, deliver: async (m) => void seen.push(m) });
    const report = await relay.runOnce();
    expect(report.missing).toEqual([]);
    expect(report.databases.map((d) => [d.shards, d.delivered])).toEqual([
      ["0/0,0/1", 4],
      ["0/2,1/0", 4],
      ["1/1,1/2", 4],
    ]);
    expect(seen.map((m) => (m.payload as { i: number }).i).sort((a, b) => a - b)).toEqual([
      ...Array(12).keys(),
    ]);
    expect(typeof (seen[0]!.payload as { amount: unknown }).amount).toBe("bigint");
    expect((await relay.runOnce()).databases.every((d) => d.claimed === 0)).toBe(true);
    expect((await relay.lag()).map((l) => l.pending)).toEqual([0, 0, 0]);
    expect((await outboxRows()).every((r) => r.status === "delivered" && r.deliveredAt)).toBe(true);
  });

  it("retries with backoff, then moves an event that keeps failing to the dead-letter state", async () => {
    await seed(1, [S.g0m0]);
    let calls = 0;
    /** A relay whose broker is always down, retrying 3 times after `baseMs`. */
    const failingRelay = (baseMs: number) =>
      createOutboxRelay({
        registry,
        maxAttempts: 3,
        backoff: { baseMs },
        deliver: async () => {
          calls++;
          throw new Error("broker unavailable");
        },
      });
    const relay = failingRelay(60_000);
    expect((await relay.runOnce()).databases[0]).toMatchObject({ claimed: 1, retried: 1 });
    expect((await relay.runOnce()).databases[0]!.claimed).toBe(0); // backing off: not yet available
    expect((await relay.lag())[0]).toMatchObject({ pending: 1, dead: 0 });
    const fast = failingRelay(0);
    await clients.a.$executeRawUnsafe(`UPDATE "OutboxEvent" SET "availableAt" = now()`);
    expect((await fast.runOnce()).databases[0]).toMatchObject({ retried: 1 });
    expect((await fast.runOnce()).databases[0]).toMatchObject({ dead: 1 });
    expect(calls).toBe(3);
    const [row] = await clients.a.outboxEvent.findMany();
    expect(row).toMatchObject({ status: "dead", attempts: 3, lastError: "broker unavailable" });
    expect((await fast.lag())[0]).toMatchObject({ pending: 0, dead: 1 });
  });

  it("two relays polling at once never deliver the same event twice (claims skip locked rows)", async () => {
    await seed(30, [S.g0m0, S.g1m0]);
    const seen: string[] = [];
    const by = { one: 0, two: 0 };
    // A barrier: each relay's first delivery waits until the other relay is delivering too, so both
    // hold claims at the same time (the race happens, or the test hangs and fails).
    const gate = () => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      return { promise, resolve };
    };
    const started = { one: gate(), two: gate() };
    const deliverAs = (me: "one" | "two", other: "one" | "two") => async (m: OutboxMessage) => {
      started[me].resolve();
      await started[other].promise;
      seen.push(m.id);
      by[me]++;
    };
    const one = createOutboxRelay({ registry, deliver: deliverAs("one", "two"), batchSize: 5 });
    const two = createOutboxRelay({ registry, deliver: deliverAs("two", "one"), batchSize: 5 });
    for (let round = 0; round < 6; round++) await Promise.all([one.runOnce(), two.runOnce()]);
    expect(by.one).toBeGreaterThan(0);
    expect(by.two).toBeGreaterThan(0);
    expect(seen).toHaveLength(30);
    expect(new Set(seen).size).toBe(30);
  });

  it("a database that is down is reported missing; the others are delivered", async () => {
    await seed(6);
    const seen: string[] = [];
    const relay = createOutboxRelay({ registry, deliver: async (m) => void seen.push(m.id) });
    const report = await withClusterStopped(SECOND.cluster, SECOND.port, () => relay.runOnce());
    expect(report.missing.map((m) => [m.database, m.shards])).toEqual([["database #2", "1/1,1/2"]]);
    expect(report.databases.map((d) => d.delivered)).toEqual([2, 2]);
    const after = await relay.runOnce();
    expect(after.missing).toEqual([]);
    expect(seen).toHaveLength(6);
  });

  it("an aggregate whose delivery waits holds up only itself: other aggregates' events go on, and each aggregate's events stay in order", async () => {
    const slow = ShardedId.generate("Customer", S.g0m0);
    const fast = ShardedId.generate("Customer", S.g0m0);
    for (let i = 0; i < 3; i++) {
      for (const aggregateId of [slow, fast]) {
        await db.$action((unit) => {
          unit.emit(S.g0m0, { topic: "t", aggregateId, payload: { i } });
        });
      }
    }
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen: string[] = [];
    const relay = createOutboxRelay({
      registry,
      deliveryTimeoutMs: 10_000,
      leaseMs: 20_000,
      deliver: async (m) => {
        const name = `${m.aggregateId === slow ? "slow" : "fast"}${(m.payload as { i: number }).i}`;
        // The slow aggregate's first event waits until the fast one's three are delivered: one
        // lane at a time would never get there (the delivery would time out instead).
        if (name === "slow0") await released;
        seen.push(name);
        if (name === "fast2") release();
      },
    });
    const report = await relay.runOnce();
    expect(report.databases.find((d) => d.shards === "0/0,0/1")).toMatchObject({ delivered: 6, retried: 0 });
    expect(seen.filter((n) => n.startsWith("slow"))).toEqual(["slow0", "slow1", "slow2"]);
    expect(seen.indexOf("fast2")).toBeLessThan(seen.indexOf("slow0"));
  });

  it(
    "a relay killed mid-batch loses nothing: its unconfirmed deliveries are delivered again",
    async () => {
      await seed(8, [S.g0m0]);
      const out = join(mkdtempSync(join(tmpdir(), "sk-relay-")), "delivered.txt");
      const child = spawn("pnpm", ["exec", "tsx", "test/relay-child.ts"], {
        cwd: new URL("..", import.meta.url).pathname,
        env: {
          ...process.env,
          RELAY_CHILD: JSON.stringify({
            urls: [inject("shardUrls").a],
            shards: [["0/0", "0/1"]],
            out,
            hangAfter: 3,
            leaseMs: 2500,
          }),
        },
        stdio: ["ignore", "pipe", "inherit"],
        detached: true,
      });
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("hanging") && resolve());
        child.on("exit", (code) => reject(new Error(`relay child exited early (${code})`)));
      });
      // Outcomes are recorded as deliveries end, not when the batch ends: the two delivered before
      // the hang are recorded while it hangs.
      const recorded = async () =>
        (await clients.a.outboxEvent.findMany({ where: { status: "delivered" } })).map((e) => e.id).sort();
      await expect.poll(recorded, { timeout: patient(20_000) }).toHaveLength(2);
      const exited = new Promise((resolve) => child.on("exit", resolve));
      process.kill(-child.pid!, "SIGKILL");
      await exited;
      const firstRun = readFileSync(out, "utf8").trim().split("\n");
      expect(firstRun).toHaveLength(3);
      expect(await recorded()).toEqual(firstRun.slice(0, 2).sort());
      const seen: string[] = [];
      const relay = createOutboxRelay({ registry, deliver: async (m) => void seen.push(m.id) });
      // The killed relay's lease ends (2.5 s): its undelivered events are claimed again.
      await eventually(
        "the killed relay's undelivered events are delivered again",
        async () => {
          await relay.runOnce();
          return seen.length >= 6;
        },
        { everyMs: 100 },
      );
      expect(seen).toHaveLength(6);
      expect(seen).toContain(firstRun[2]); // the one it hung on: delivered again, at least once
      expect(seen).not.toContain(firstRun[0]); // recorded as delivered: not delivered twice
      expect(new Set([...seen, ...firstRun]).size).toBe(8); // nothing lost
      expect((await relay.lag())[0]!.pending).toBe(0);
    },
    patient(60_000),
  );

  it("a lease no longer than a delivery timeout is refused (it could never deliver)", () => {
    expect(() => createOutboxRelay({ registry, leaseMs: 2000, deliver: async () => {} })).toThrow(
      /leaseMs \(2000\) must be longer than deliveryTimeoutMs \(10000\)/,
    );
  });

  it("each database's events are delivered oldest first", async () => {
    await seed(40, [S.g0m0, S.g0m1]); // one database, events written one after another
    const written = (
      await clients.a.outboxEvent.findMany({ orderBy: [{ createdAt: "asc" }, { id: "asc" }] })
    ).map((e) => e.id);
    // Updates scatter the rows physically, so the table's order is no longer the order written.
    await clients.a.$executeRawUnsafe(
      `UPDATE "OutboxEvent" SET "lastError" = 'x' WHERE id = ANY($1::uuid[])`,
      written.filter((_, i) => i % 3 === 0),
    );
    const seen: string[] = [];
    await createOutboxRelay({
      registry,
      batchSize: 100,
      deliver: async (m) => void seen.push(m.id),
    }).runOnce();
    expect(seen).toEqual(written);
  });

  it("a hung delivery times out and is retried; the events after it are delivered in the same poll", async () => {
    await seed(4, [S.g0m0]);
    const [first] = await clients.a.outboxEvent.findMany({ orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
    const seen: string[] = [];
    let aborted = false;
    const relay = createOutboxRelay({
      registry,
      deliveryTimeoutMs: 200,
      backoff: { baseMs: 0 },
      deliver: (m, { signal }) => {
        if (m.id === first!.id && m.attempts === 0) {
          signal.addEventListener("abort", () => (aborted = true));
          return new Promise(() => {}); // hangs for good
        }
        seen.push(m.id);
        return Promise.resolve();
      },
    });
    const report = await relay.runOnce();
    expect(report.databases[0]).toMatchObject({ claimed: 4, delivered: 3, retried: 1, dead: 0 });
    expect(aborted).toBe(true);
    const hung = await clients.a.outboxEvent.findUnique({ where: { id: first!.id } });
    expect(hung).toMatchObject({
      status: "pending",
      attempts: 1,
      lastError: "delivery timed out after 200 ms",
    });
    expect((await relay.runOnce()).databases[0]).toMatchObject({ claimed: 1, delivered: 1 });
    expect(seen).toHaveLength(4);
  });

  it("a failure retrying can fix (its shard unavailable) is retried past maxAttempts, never dead-lettered", async () => {
    await seed(1, [S.g0m0]);
    let down = true;
    const unavailable = Object.assign(new Error("Can't reach database server"), {
      name: "PrismaClientKnownRequestError",
      code: "P1001",
    });
    const relay = createOutboxRelay({
      registry,
      maxAttempts: 2,
      backoff: { baseMs: 0 },
      deliver: async () => {
        if (down) throw unavailable;
      },
    });
    for (let i = 0; i < 5; i++)
      expect((await relay.runOnce()).databases[0]).toMatchObject({ retried: 1, dead: 0 });
    expect((await relay.lag())[0]).toMatchObject({ pending: 1, dead: 0 });
    down = false;
    expect((await relay.runOnce()).databases[0]).toMatchObject({ delivered: 1 });
    expect((await clients.a.outboxEvent.findMany())[0]).toMatchObject({ status: "delivered", attempts: 6 });
  });

  it("an outcome reported after the lease was lost changes nothing", async () => {
    await seed(1, [S.g0m0]);
    let release!: () => void;
    const late = createOutboxRelay({
      registry,
      leaseMs: 60_000,
      deliveryTimeoutMs: 30_000, // the test ends the lease itself (below), long before this
      deliver: () =>
        new Promise<void>((r) => (release = r)).then(() => Promise.reject(new Error("too late"))),
    });
    // The first relay claims and its delivery outlives the lease...
    const running = late.runOnce();
    await expect.poll(() => release !== undefined).toBe(true);
    await clients.a.$executeRawUnsafe(`UPDATE "OutboxEvent" SET "availableAt" = now()`); // its lease ends
    // ...a second relay claims the event again and delivers it.
    const prompt = createOutboxRelay({ registry, deliver: async () => {} });
    expect((await prompt.runOnce()).databases[0]).toMatchObject({ claimed: 1, delivered: 1 });
    release();
    await running;
    expect((await clients.a.outboxEvent.findMany())[0]).toMatchObject({
      status: "delivered",
      attempts: 2,
      lastError: null,
    });
  });

  it("dead letters are logged, handed to onDead, counted by lag() and redriven back to delivery", async () => {
    await seed(2, [S.g0m0]);
    const warnings: string[] = [];
    const dead: string[] = [];
    let broken = true;
    const relay = createOutboxRelay({
      registry,
      maxAttempts: 1,
      logger: { warn: (m) => warnings.push(m) },
      onDead: (m) => dead.push(m.id),
      deliver: async () => {
        if (broken) throw new Error("payload rejected by the consumer");
      },
    });
    expect((await relay.runOnce()).databases[0]).toMatchObject({ dead: 2 });
    expect(dead).toHaveLength(2);
    expect(warnings[0]).toMatch(/is dead after 1 attempts: payload rejected/);
    expect((await relay.lag())[0]).toMatchObject({ pending: 0, dead: 2 });
    broken = false;
    expect(await relay.redrive({ ids: [dead[0]!] })).toEqual([
      { database: "database #0", shards: "0/0,0/1", redriven: 1 },
      { database: "database #1", shards: "0/2,1/0", redriven: 0 },
      { database: "database #2", shards: "1/1,1/2", redriven: 0 },
    ]);
    expect((await relay.runOnce()).databases[0]).toMatchObject({ delivered: 1 });
    expect((await relay.redrive()).map((r) => r.redriven)).toEqual([1, 0, 0]);
    expect((await relay.runOnce()).databases[0]).toMatchObject({ delivered: 1 });
    expect((await relay.lag())[0]).toMatchObject({ pending: 0, dead: 0 });
  });

  it("a redrive with a database down redrives the others and reports the one down, by name", async () => {
    await seed(4, [S.g0m0, S.g1m1]); // 2 events on a, 2 on c (the second server)
    const relay = createOutboxRelay({
      registry,
      maxAttempts: 1,
      logger: { warn: () => {} },
      deliver: async () => {
        throw new Error("payload rejected by the consumer");
      },
    });
    await relay.runOnce();
    expect((await relay.lag()).map((l) => l.dead)).toEqual([2, 0, 2]);
    const report = await withClusterStopped(SECOND.cluster, SECOND.port, () => relay.redrive());
    expect(report.map(({ database, redriven }) => [database, redriven])).toEqual([
      ["database #0", 2],
      ["database #1", 0],
      ["database #2", null],
    ]);
    expect(report[2]!.error).toBeDefined();
    expect((await relay.lag()).map((l) => [l.pending, l.dead])).toEqual([
      [2, 0],
      [0, 0],
      [0, 2],
    ]);
    expect((await relay.redrive()).map((r) => r.redriven)).toEqual([0, 0, 2]);
  });

  it("spare databases (holding no shard) are polled, counted and redriven each under its own name, for no shard", async () => {
    // The spares are second clients of databases a and b: to the registry they hold no shard, so
    // the rows they see there (a's events of 0/0, like a copy a move left behind) are not theirs.
    const spares = [
      new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").a }) }),
      new PrismaClient({ adapter: new PrismaPg({ connectionString: inject("shardUrls").b }) }),
    ];
    try {
      const withSpares = createShardRegistry({
        shards: registry.shards.map((shard) => ({ shard, client: registry.databaseOf(shard).client })),
        databases: [
          ...registry.databases.map((p) => ({ client: p.client, name: p.name })),
          { client: spares[0]!, name: "spare one" },
          { client: spares[1]!, name: "spare two" },
        ],
      });
      await seed(3, [S.g0m0]);
      let broken = true;
      const relay = createOutboxRelay({
        registry: withSpares,
        maxAttempts: 1,
        logger: { warn: () => {} },
        deliver: async (m) => {
          if (broken && m.payload && (m.payload as { i: number }).i < 2) throw new Error("rejected");
        },
      });
      const polled = await relay.runOnce();
      expect(polled.missing).toEqual([]);
      expect(polled.databases.map((d) => [d.database, d.shards, d.claimed, d.delivered, d.dead])).toEqual([
        ["database #0", "0/0,0/1", 3, 1, 2],
        ["database #1", "0/2,1/0", 0, 0, 0],
        ["database #2", "1/1,1/2", 0, 0, 0],
        ["spare one", "", 0, 0, 0],
        ["spare two", "", 0, 0, 0],
      ]);
      expect((await relay.lag()).map((l) => [l.database, l.pending, l.dead])).toEqual([
        ["database #0", 0, 2],
        ["database #1", 0, 0],
        ["database #2", 0, 0],
        ["spare one", 0, 0],
        ["spare two", 0, 0],
      ]);
      broken = false;
      expect((await relay.redrive()).map((r) => [r.database, r.redriven])).toEqual([
        ["database #0", 2],
        ["database #1", 0],
        ["database #2", 0],
        ["spare one", 0],
        ["spare two", 0],
      ]);
    } finally {
      await Promise.all(spares.map((c) => c.$disconnect()));
    }
  });

  it(
    "a frozen database (its server SIGSTOPped) delays only its own events; its polls fail in bounded time; lag() reports it unavailable",
    async () => {
      await seed(4, [S.g0m0, S.g1m1]); // 2 events on a, 2 on c (the second server)
      await clients.c.outboxEvent.count(); // open a connection to c before it freezes
      const seen: string[] = [];
      const errors: unknown[] = [];
      const relay = createOutboxRelay({
        registry,
        pollIntervalMs: 20,
        lagTimeoutMs: 300,
        queryTimeoutMs: 300,
        // A claim that timed out here runs once the server thaws, and its events wait for their lease.
        deliveryTimeoutMs: 1000,
        leaseMs: 2000,
        onError: (error, database) => void errors.push([database, error]),
        deliver: async (m) => void seen.push(m.shard.key),
      });
      await withClusterFrozen(SECOND.cluster, async () => {
        relay.start();
        await expect.poll(() => seen.filter((k) => k === "0/0").length, { timeout: patient(10_000) }).toBe(2);
        const lag = await relay.lag();
        expect(lag.map((l) => l.pending)).toEqual([0, 0, null]);
        expect(lag[2]!.error).toBeDefined();
        expect(seen.filter((k) => k === "1/1")).toEqual([]);
        // The frozen database's loop does not hang on it: its polls fail, each after queryTimeoutMs.
        await expect.poll(() => errors.length, { timeout: patient(20_000) }).toBeGreaterThanOrEqual(2);
        const [database, error] = errors[0] as [string, DatabaseTimeoutError];
        expect(database).toBe("database #2");
        expect(error).toBeInstanceOf(DatabaseTimeoutError);
        expect(error.message).toBe("database database #2 (shards 1/1, 1/2) did not answer within 300 ms");
        expect(isShardUnavailable(error)).toBe(true);
        // A single poll of every database answers too, the frozen one missing.
        const once = await relay.runOnce();
        expect(once.missing.map((m) => [m.database, (m.error as Error).name])).toEqual([
          ["database #2", "DatabaseTimeoutError"],
        ]);
      });
      await expect.poll(() => seen.filter((k) => k === "1/1").length, { timeout: patient(20_000) }).toBe(2);
      await relay.stop();
    },
    patient(60_000),
  );

  it("start() keeps polling until stop()", async () => {
    await seed(3);
    const seen: string[] = [];
    const relay = createOutboxRelay({
      registry,
      pollIntervalMs: 20,
      deliver: async (m) => void seen.push(m.id),
    });
    relay.start();
    await seed(3);
    await eventually("the polling relay delivers the events seeded after start()", () => seen.length >= 6);
    await relay.stop();
    expect(seen).toHaveLength(6);
  });
});

describe("idempotency", () => {
  it("a retried command returns the recorded result instead of deciding twice", async () => {
    const c = customer(S.g1m0);
    await db.customer.create({ data: c });
    let runs = 0;
    const rename = (key: string, name: string) =>
      db.$transactionOn(c.id, (tx) =>
        idempotent(tx, { shard: c.id, kind: "rename", key }, { customer: c.id, name }, async () => {
          runs++;
          const updated = await tx.customer.update({ where: { id: c.id }, data: { name } });
          return { name: updated.name, at: 7n };
        }),
      );
    expect(await rename("k1", "first")).toEqual({ result: { name: "first", at: 7n }, replayed: false });
    expect(await rename("k1", "first")).toEqual({ result: { name: "first", at: 7n }, replayed: true });
    await expect(rename("k1", "other")).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(runs).toBe(1);
    const concurrent = await Promise.all([
      rename("k2", "twice"),
      rename("k2", "twice"),
      rename("k2", "twice"),
    ]);
    expect(runs).toBe(2);
    expect(concurrent.filter((r) => !r.replayed)).toHaveLength(1);
  });

  it("a failed command records nothing: the retry runs it", async () => {
    const c = customer(S.g0m1);
    await db.customer.create({ data: c });
    const attempt = (fail: boolean) =>
      db.$transactionOn(c.id, (tx) =>
        idempotent(tx, { shard: c.id, kind: "k", key: "k" }, { c: c.id }, async () => {
          if (fail) throw new Error("declined");
          return "ok";
        }),
      );
    await expect(attempt(true)).rejects.toThrow("declined");
    expect((await attempt(false)).replayed).toBe(false);
  });

  it("a key names one command of one kind on its logical shard; another kind is a conflict", async () => {
    const one = customer(S.g0m0);
    const other = customer(S.g0m1); // another logical shard of the same database
    for (const data of [one, other]) await db.customer.create({ data });
    const run = (shard: string, kind: string) =>
      db.$transactionOn(shard, (tx) =>
        idempotent(tx, { shard, kind, key: "same" }, { shard }, async () => kind),
      );
    expect(await run(one.id, "deposit")).toEqual({ result: "deposit", replayed: false });
    await expect(run(one.id, "withdrawal")).rejects.toBeInstanceOf(IdempotencyConflictError);
    // Per logical shard: the same key on 0/1 is another command (and moves with 0/1 when it moves).
    expect(await run(other.id, "withdrawal")).toEqual({ result: "withdrawal", replayed: false });
    const rows = await clients.a.idempotencyKey.findMany({ orderBy: { shard: "asc" } });
    expect(rows.map((r) => [r.shard, r.kind])).toEqual([
      [S.g0m0.bits, "deposit"],
      [S.g0m1.bits, "withdrawal"],
    ]);
  });

  it("a refusal is recorded and replayed; what the command changed before refusing is rolled back", async () => {
    const c = customer(S.g1m2);
    await db.customer.create({ data: c });
    let runs = 0;
    const attempt = () =>
      db.$transactionOn(c.id, (tx) =>
        idempotent(
          tx,
          { shard: c.id, kind: "withdraw", key: "w1" },
          { amount: 5n },
          async () => {
            runs++;
            await tx.customer.update({ where: { id: c.id }, data: { name: "changed before refusing" } });
            throw Object.assign(new Error("insufficient funds"), {
              refusal: { code: "INSUFFICIENT_FUNDS", needs: 5n },
            });
          },
          { refusal: (error) => (error as { refusal?: unknown }).refusal },
        ),
      );
    expect(await attempt()).toEqual({ refusal: { code: "INSUFFICIENT_FUNDS", needs: 5n }, replayed: false });
    expect(await attempt()).toEqual({ refusal: { code: "INSUFFICIENT_FUNDS", needs: 5n }, replayed: true });
    expect(runs).toBe(1);
    expect((await clients.c.customer.findUnique({ where: { id: c.id } }))?.name).toBe("c");
  });

  it("consumeOnce says whether a consumer sees an event for the first time", async () => {
    const eventId = ShardedId.generate("Event", S.g0m2);
    const once = () => db.$transactionOn(S.g0m2, (tx) => consumeOnce(tx, S.g0m2, "credit", eventId));
    expect(await once()).toBe(true);
    expect(await once()).toBe(false);
    expect(await db.$transactionOn(S.g0m2, (tx) => consumeOnce(tx, S.g0m2, "audit", eventId))).toBe(true);
  });
});
