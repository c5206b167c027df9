import { metrics, SpanStatusCode, trace } from "@opentelemetry/api";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { newCustomer, walletOf, worldPlacement } from "../test/layout.js";
import { TestMetricReader } from "../test/metrics.js";
import { makeWorld, models, S } from "../test/world.js";
import { PartialCommitError } from "./errors.js";
import { shardRouting } from "./extension.js";
import type { OwnershipHook } from "./ownership.js";
import { withCurrentOwner } from "./ownership.js";
import { createShardRegistry } from "./registry.js";
import { createOutboxRelay } from "./relay/relay.js";
import { Telemetry } from "./telemetry.js";

const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const reader = new TestMetricReader();
const meterProvider = new MeterProvider({ readers: [reader] });
const telemetry = { tracerProvider, meterProvider };

const world = makeWorld();
const { registry, clients } = world;
const db = clients.a.$extends(shardRouting({ registry, models, telemetry }));
afterAll(() => world.close());
beforeEach(async () => {
  await world.truncate();
  exporter.reset();
});

const spans = (name?: string): ReadableSpan[] =>
  exporter.getFinishedSpans().filter((s) => name === undefined || s.name === name);
const counted = async (metric: string, key: string, value: string) =>
  (await reader.points(metric))
    .filter((p) => p.attributes[key] === value)
    .reduce((n, p) => n + (p.value as number), 0);

describe("a routed call", () => {
  it("makes one span, started when awaited, with the shard, database and db.* attributes", async () => {
    const customer = newCustomer(S.g1m1);
    await clients.c.customer.create({ data: customer });
    const before = await counted("shardkit.calls", "shardkit.shard", "1/1");
    const pending = db.customer.findUnique({ where: { id: customer.id } });
    expect(spans()).toHaveLength(0);
    expect((await pending)?.id).toBe(customer.id);
    const [span] = spans("shardkit Customer.findUnique");
    expect(spans()).toHaveLength(1);
    expect(span!.attributes).toMatchObject({
      "db.system.name": "postgresql",
      "db.operation.name": "findUnique",
      "db.collection.name": "Customer",
      "shardkit.shard": "1/1",
      "shardkit.plan": "shard",
      "shardkit.database": registry.databases[2]!.name,
    });
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
    expect(await counted("shardkit.calls", "shardkit.shard", "1/1")).toBe(before + 1);
  });

  it("keeps Prisma's fluent API and laziness; a call never awaited makes no span", async () => {
    const customer = newCustomer(S.g0m2);
    await db.customer.create({ data: customer });
    await db.wallet.create({
      data: { id: ShardedId.colocatedWith("Wallet", customer.id), customerId: customer.id },
    });
    exporter.reset();
    world.clear();
    void db.customer.findUnique({ where: { id: customer.id } });
    await Promise.resolve();
    expect(world.landed("Customer")).toEqual([]);
    expect(spans()).toHaveLength(0);
    const wallets = await db.customer.findUnique({ where: { id: customer.id } }).wallets();
    expect(wallets).toHaveLength(1);
  });

  it("a call on a shard transaction's client is a span too", async () => {
    const customer = newCustomer(S.g1m2);
    await db.$transactionOn(customer.id, async (tx) => {
      await tx.customer.create({ data: customer });
    });
    const [span] = spans("shardkit Customer.create");
    expect(span!.attributes).toMatchObject({ "shardkit.shard": "1/2", "shardkit.plan": "shard" });
  });

  it("a failing call ends its span with error status", async () => {
    const customer = newCustomer(S.g0m0);
    await db.customer.create({ data: customer });
    exporter.reset();
    await expect(db.customer.create({ data: customer })).rejects.toThrow();
    const [span] = spans("shardkit Customer.create");
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
    expect(span!.attributes["shardkit.shard"]).toBe("0/0");
  });
});

describe("a scatter", () => {
  const nowhere = new PrismaClient({
    adapter: new PrismaPg({
      connectionString: "postgresql://postgres@127.0.0.1:1/none",
      connectionTimeoutMillis: 2000,
    }),
  });
  const degraded = createShardRegistry({
    shards: worldPlacement(clients.a, clients.b, nowhere),
    defaultShard: S.g0m0,
  });
  const partial = clients.a.$extends(
    shardRouting({ registry: degraded, models, keyless: { mode: "scatter", policy: "partial" }, telemetry }),
  );
  afterAll(() => nowhere.$disconnect());

  it("has one child span per database and the missing database as an event; misses are counted", async () => {
    await clients.a.customer.create({ data: newCustomer(S.g0m0) });
    const missingName = degraded.databases[2]!.name;
    const before = await counted("shardkit.scatter.misses", "shardkit.database", missingName);
    const rows = await partial.customer.findMany({ take: 10, orderBy: { id: "asc" } });
    expect(rows).toHaveLength(1);
    const [parent] = spans("shardkit Customer.findMany");
    expect(parent!.attributes).toMatchObject({
      "shardkit.plan": "scatter",
      "shardkit.scatter.complete": false,
      "shardkit.scatter.missing": ["1/1", "1/2"],
    });
    const children = spans().filter((s) => s.parentSpanContext?.spanId === parent!.spanContext().spanId);
    expect(children.map((c) => c.attributes["shardkit.database"]).sort()).toEqual(
      degraded.databases.map((p) => p.name).sort(),
    );
    const failed = children.filter((c) => c.status.code === SpanStatusCode.ERROR);
    expect(failed.map((c) => c.attributes["shardkit.database"])).toEqual([missingName]);
    expect(
      parent!.events.map((e) => [
        e.name,
        e.attributes?.["shardkit.database"],
        e.attributes?.["shardkit.shards"],
      ]),
    ).toEqual([["shardkit.scatter.missing", missingName, ["1/1", "1/2"]]]);
    expect(await counted("shardkit.scatter.misses", "shardkit.database", missingName)).toBe(before + 1);
  });
});

describe("an action", () => {
  it("a partial commit ends the action's span with error status and the committed/failed shards", async () => {
    const first = newCustomer(S.g0m0);
    const owner = ShardedId.generate("Customer", S.g1m0);
    const error = await db
      .$action(
        (unit) => {
          unit.create("customer", { data: first });
          unit.create("wallet", walletOf(owner));
        },
        { allowCrossShard: true },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialCommitError);
    const [span] = spans("shardkit $action");
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
    expect(span!.attributes).toMatchObject({
      "shardkit.action.committed": ["0/0"],
      "shardkit.action.failed": ["1/0"],
      "shardkit.action.not_attempted": [],
    });
  });

  it("a committed action ends its span with the shards it committed", async () => {
    await db.$action((unit) => void unit.create("customer", { data: newCustomer(S.g0m1) }));
    const [span] = spans("shardkit $action");
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
    expect(span!.attributes["shardkit.action.committed"]).toEqual(["0/1"]);
  });
});

describe("the outbox relay", () => {
  it("makes a span per delivery and counts dead letters", async () => {
    const c = newCustomer(S.g0m0);
    await db.$action((unit) => {
      unit.create("customer", { data: c });
      unit.emit(c.id, { topic: "customer.created", aggregateId: c.id, payload: {} });
    });
    exporter.reset();
    const before = await counted("shardkit.relay.dead_letters", "shardkit.relay.topic", "customer.created");
    const relay = createOutboxRelay({
      registry,
      maxAttempts: 1,
      logger: { warn() {} },
      telemetry,
      deliver: async () => {
        throw new Error("broker refused");
      },
    });
    expect((await relay.runOnce()).databases[0]).toMatchObject({ dead: 1 });
    const [span] = spans("shardkit.relay.deliver");
    expect(span!.attributes).toMatchObject({
      "shardkit.relay.topic": "customer.created",
      "shardkit.shard": "0/0",
      "shardkit.relay.attempt": 1,
      "shardkit.database": registry.databases[0]!.name,
    });
    expect(typeof span!.attributes["shardkit.relay.event_id"]).toBe("string");
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
    expect(await counted("shardkit.relay.dead_letters", "shardkit.relay.topic", "customer.created")).toBe(
      before + 1,
    );
    const lag = await reader.points("shardkit.relay.lag");
    expect(lag.map((p) => p.attributes["shardkit.database"]).sort()).toEqual(
      registry.databases.map((p) => p.name).sort(),
    );
  });
});

describe("stale-owner refusals", () => {
  it("each refusal withCurrentOwner retries adds one to shardkit.ownership.stale_rejections", async () => {
    const refusal = new Error("stale owner");
    const hook: OwnershipHook = {
      rejection: (error) => (error === refusal ? { shard: S.g1m2 } : undefined),
      refresh: async () => {},
      retries: 3,
    };
    const before = await counted("shardkit.ownership.stale_rejections", "shardkit.shard", "1/2");
    let runs = 0;
    const result = await withCurrentOwner(
      hook,
      async () => {
        if (runs++ < 2) throw refusal;
        return "done";
      },
      new Telemetry(telemetry),
    );
    expect(result).toBe("done");
    expect(await counted("shardkit.ownership.stale_rejections", "shardkit.shard", "1/2")).toBe(before + 2);
  });
});

describe("telemetry: false and the global providers", () => {
  afterEach(() => {
    trace.disable();
    metrics.disable();
  });

  it("by default uses the global SDK once it is registered; telemetry: false makes no span even then", async () => {
    const off = clients.a.$extends(shardRouting({ registry, models, telemetry: false }));
    const byDefault = clients.a.$extends(shardRouting({ registry, models }));
    const customer = newCustomer(S.g0m2);
    await clients.b.customer.create({ data: customer });
    // No SDK registered: the default makes no span (the API is a no-op).
    await byDefault.customer.findUnique({ where: { id: customer.id } });
    expect(spans()).toHaveLength(0);
    expect(trace.setGlobalTracerProvider(tracerProvider)).toBe(true);
    await off.customer.findUnique({ where: { id: customer.id } });
    await off.$action((unit) => void unit.create("customer", { data: newCustomer(S.g0m0) }));
    expect(spans()).toHaveLength(0);
    await byDefault.customer.findUnique({ where: { id: customer.id } });
    expect(spans("shardkit Customer.findUnique")).toHaveLength(1);
    expect(spans()[0]!.attributes["shardkit.shard"]).toBe("0/2");
  });
});
