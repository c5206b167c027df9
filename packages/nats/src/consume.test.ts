import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createOutboxRelay, emitEvent, type OutboxMessage } from "@shardkit/prisma";
import { patient, within } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterEach, describe, expect, inject, it, onTestFinished } from "vitest";
import type { Deposit, NatsScope, World } from "../test/world.js";
import {
  counter,
  natsScope,
  outboxMessages,
  perTestWorld,
  recordingSink,
  S,
  spawnChild,
  TOPIC,
} from "../test/world.js";
import {
  type ConsumeEventsOptions,
  consumeEvents,
  type EventConsumer,
  type ReceivedEvent,
} from "./consume.js";
import { InvalidEventMessageError, JetStreamSetupError, NatsOptionsError } from "./errors.js";
import { isRetryableDelivery, type PublishReceipt } from "./sink.js";

let w: World;
let n: NatsScope;
perTestWorld("consume", (world, nats) => {
  [w, n] = [world, nats];
});
const consumers: EventConsumer[] = [];
afterEach(async () => {
  for (const c of consumers.splice(0)) await c.stop();
});

/** Publishes every seeded event through the relay and the sink (each delivered twice, as a relay may). */
async function publishAll(twice = false) {
  const { publish } = recordingSink({ connection: n.nc, prefix: n.prefix, stream: n.stream });
  const receipts: PublishReceipt[] = [];
  const relay = createOutboxRelay({
    registry: w.registry,
    retryable: isRetryableDelivery,
    deliver: async (m: OutboxMessage) => {
      receipts.push(await publish(m));
      if (twice) receipts.push(await publish(m));
    },
  });
  await relay.runOnce();
  return receipts;
}

type Tx = Parameters<Parameters<World["db"]["$transactionOn"]>[1]>[0];
type Outcome = { id: string; outcome: "applied" | "duplicate"; deliveryCount: number; seq: number };

/** consumeEvents applying deposits to the test accounts; outcomes and errors recorded and counted. */
async function ledger(overrides: Partial<ConsumeEventsOptions<Tx, Deposit>> = {}) {
  const outcomes: Outcome[] = [];
  const errors: unknown[] = [];
  const done = counter();
  const failed = counter();
  const consumer = await consumeEvents<Tx, Deposit>({
    connection: n.nc,
    stream: n.stream,
    consumer: "ledger",
    db: w.db,
    shardOf: (event) => event.payload.account,
    apply: async (tx, event) => {
      await tx.account.update({
        where: { id: event.payload.account },
        data: { balance: { increment: event.payload.amount } },
      });
    },
    retry: { baseMs: 10, maxMs: 50 },
    onEvent: (event, outcome) => {
      outcomes.push({ id: event.id, outcome, deliveryCount: event.deliveryCount, seq: event.streamSequence });
      done.tick();
    },
    onError: (error) => {
      errors.push(error);
      failed.tick();
    },
    ...overrides,
  });
  consumers.push(consumer);
  return { consumer, outcomes, errors, done, failed };
}

describe("consumeEvents: each event applied once", () => {
  it("applies every event once in its account's shard transaction, and records it there; the relay's second publishes were absorbed by JetStream", async () => {
    const accounts = await w.seed(5); // 10 events: amounts 1..5 on each account
    const receipts = await publishAll(true);
    expect(receipts.filter((r) => r.duplicate)).toHaveLength(10);
    const { consumer, outcomes, done, errors } = await ledger();
    await done.reached(10);
    expect(outcomes.every((o) => o.outcome === "applied")).toBe(true);
    expect(new Set(outcomes.map((o) => o.id)).size).toBe(10);
    expect(errors).toEqual([]);
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 15n, [accounts[1]!]: 15n });
    expect(await w.processed()).toBe(10);
    // recorded on the shard that applied it (the account's), under the consumer's name
    const a = await w.clients.a.processedEvent.findMany();
    expect(a.every((p) => p.shard === S.a.bits && p.consumer === "ledger")).toBe(true);
    expect(consumer.stats).toEqual({ applied: 10, duplicates: 0, failed: 0, invalid: 0 });
  });

  it("a relay redelivery after the duplicate window: the stream holds two copies, the consumer applies one and only acks the other", async () => {
    await n.close();
    n = await natsScope();
    onTestFinished(() => n.close());
    await n.createStream({ duplicateWindowMs: 100 });
    const accounts = await w.seed(1);
    const { publish } = recordingSink({ connection: n.nc, prefix: n.prefix, stream: n.stream });
    const relay = createOutboxRelay({ registry: w.registry, deliver: async (m) => void (await publish(m)) });
    await relay.runOnce(); // both events, once each
    // The relay delivers the first event again (its lease lost, say): once the window has passed,
    // JetStream stores it again.
    const message = (await outboxMessages(w)).find((m) => m.aggregateId === accounts[0])!;
    await eventually(
      "JetStream stores the redelivery once its duplicate window has passed",
      async () => !(await publish(message)).duplicate,
    );
    expect(await n.stored()).toHaveLength(3);
    const { outcomes, done } = await ledger();
    await done.reached(3);
    const copies = outcomes.filter((o) => o.id === message.id);
    expect(copies.map((o) => o.outcome)).toEqual(["applied", "duplicate"]);
    expect(copies[0]!.seq).not.toBe(copies[1]!.seq);
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 1n, [accounts[1]!]: 1n });
    expect(await w.processed()).toBe(2);
  });

  it("a failed apply rolls back and is nak'ed: NATS redelivers it and it is applied once", async () => {
    const accounts = await w.seed(2);
    await publishAll();
    let failOnce = true;
    const { outcomes, done, errors, consumer } = await ledger({
      apply: async (tx, event) => {
        await tx.account.update({
          where: { id: event.payload.account },
          data: { balance: { increment: event.payload.amount } },
        });
        if (failOnce && event.payload.amount === 2n) {
          failOnce = false;
          throw new Error("the ledger's downstream check failed");
        }
      },
    });
    await done.reached(4);
    expect(errors.map((e) => (e as Error).message)).toEqual(["the ledger's downstream check failed"]);
    const retried = outcomes.find((o) => o.deliveryCount === 2)!;
    expect(retried.outcome).toBe("applied");
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 3n, [accounts[1]!]: 3n });
    expect(consumer.stats).toEqual({ applied: 4, duplicates: 0, failed: 1, invalid: 0 });
  });

  it(
    "an ack that never reaches NATS (the connection lost after the commit): NATS redelivers after the ack wait and the event is recognised",
    async () => {
      const accounts = await w.seed(1);
      await publishAll();
      // Consumer A commits the first event, then loses its connection before its ack.
      const ncA = await connect({ servers: inject("natsUrl") });
      const committed: string[] = [];
      let current: ReceivedEvent<Deposit> | undefined;
      const lostAck = {
        async $transactionOn<R>(shard: string, fn: (tx: Tx) => Promise<R>): Promise<R> {
          const result = await w.db.$transactionOn(shard, fn);
          committed.push(current!.id);
          await ncA.close();
          return result;
        },
      };
      const a = await consumeEvents<Tx, Deposit>({
        connection: ncA,
        stream: n.stream,
        consumer: "ledger",
        ackWaitMs: 1000,
        concurrency: 1, // one event in hand when the connection goes
        db: lostAck,
        shardOf: (event) => {
          current = event;
          return event.payload.account;
        },
        apply: async (tx, event) => {
          await tx.account.update({
            where: { id: event.payload.account },
            data: { balance: { increment: event.payload.amount } },
          });
        },
        onError: () => {},
      });
      await within(
        a.done.catch(() => {}),
        10_000,
        "consumer A ending with its connection",
      );
      expect(committed).toHaveLength(1);
      expect(a.stats.applied).toBe(1);

      // Consumer B on the same durable gets everything A did not ack, the committed event included.
      const b = await ledger();
      await b.done.reached(2);
      const again = b.outcomes.find((o) => o.id === committed[0])!;
      expect(again.outcome).toBe("duplicate");
      expect(again.deliveryCount).toBeGreaterThanOrEqual(2);
      expect(b.outcomes.filter((o) => o.outcome === "applied")).toHaveLength(1);
      expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 1n, [accounts[1]!]: 1n });
      expect(await w.processed()).toBe(2);
    },
    patient(30_000),
  );

  it(
    "a consumer process SIGKILLed between its commit and its ack: the next process recognises the redelivered event and applies the rest",
    async () => {
      const accounts = await w.seed(2); // 4 events
      await publishAll();
      const { child, exited } = spawnChild("consumer-child.ts", "CONSUMER_CHILD", w, {
        stream: n.stream,
        consumer: "ledger",
        ackWaitMs: 1000,
      });
      const committed = await within(
        new Promise<string>((resolve, reject) => {
          let out = "";
          child.stdout!.on("data", (chunk: Buffer) => {
            out += chunk.toString();
            const line = out.split("\n").find((l) => l.startsWith("committed "));
            if (line) resolve(line.split(" ")[1]!);
          });
          child.once("exit", (code) => reject(new Error(`consumer child exited early (${code})`)));
        }),
        45_000, // a process start (tsx, Prisma, NATS) can take long on a busy machine
        "the consumer child committing its first event",
      );
      child.kill("SIGKILL");
      await exited;
      expect(await w.processed()).toBe(1); // applied and recorded, never acked

      const { outcomes, done, consumer } = await ledger();
      await done.reached(4);
      expect(outcomes.find((o) => o.id === committed)?.outcome).toBe("duplicate");
      expect(outcomes.filter((o) => o.outcome === "applied")).toHaveLength(3);
      expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 3n, [accounts[1]!]: 3n });
      expect(await w.processed()).toBe(4);
      expect(consumer.stats).toMatchObject({ applied: 3, duplicates: 1 });
    },
    patient(90_000),
  );

  it("applies different aggregates side by side and one aggregate's events in order", async () => {
    const accounts = await w.seed(6);
    await publishAll();
    const order: Record<string, bigint[]> = {};
    let running = 0;
    let most = 0;
    let bothRunning: () => void = () => {};
    const overlap = new Promise<void>((resolve) => {
      bothRunning = resolve;
    });
    const { done, consumer } = await ledger({
      apply: async (tx, event) => {
        running++;
        most = Math.max(most, running);
        if (running === 2) bothRunning();
        // The first events of both accounts wait for each other: only lanes side by side get past.
        if (event.payload.amount === 1n) await within(overlap, 10_000, "two lanes at once");
        await tx.account.update({
          where: { id: event.payload.account },
          data: { balance: { increment: event.payload.amount } },
        });
        order[event.payload.account] = [...(order[event.payload.account] ?? []), event.payload.amount];
        running--;
      },
    });
    await done.reached(12);
    expect(most).toBe(2);
    for (const account of accounts) expect(order[account]).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
    expect(consumer.stats.applied).toBe(12);
  });

  it("a new durable reading the stream from the start (a reset consumer) applies nothing twice", async () => {
    const accounts = await w.seed(2);
    await publishAll();
    const first = await ledger();
    await first.done.reached(4);
    await first.consumer.stop();
    const replay = await ledger({ durable: "ledger-replay" });
    await replay.done.reached(4);
    expect(replay.outcomes.map((o) => o.outcome)).toEqual(Array(4).fill("duplicate"));
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 3n, [accounts[1]!]: 3n });
  });

  it("a message that is not an outbox event is terminated (never redelivered) and reported; the events after it are applied", async () => {
    const accounts = await w.seed(1);
    await jetstream(n.nc).publish(`${n.prefix}.${TOPIC}`, "not an event");
    await publishAll();
    const { outcomes, done, errors, failed, consumer } = await ledger();
    await done.reached(2);
    await failed.reached(1);
    expect(errors[0]).toBeInstanceOf(InvalidEventMessageError);
    expect((errors[0] as InvalidEventMessageError).streamSequence).toBe(1);
    expect(outcomes.map((o) => o.outcome)).toEqual(["applied", "applied"]);
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 1n, [accounts[1]!]: 1n });
    await consumer.stop();
    const info = await (await jetstreamManager(n.nc)).consumers.info(n.stream, "ledger");
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
  });

  it("stop() waits for the event in hand and ends the loop; events published later wait for the next consumer", async () => {
    const accounts = await w.seed(1);
    await publishAll();
    const { consumer, done } = await ledger();
    await done.reached(2);
    await consumer.stop();
    await within(consumer.done, 5000, "the loop ending");
    await w.db.$transactionOn(accounts[0]!, async (tx) => {
      await emitEvent(tx, accounts[0]!, {
        topic: TOPIC,
        aggregateId: accounts[0]!,
        payload: { account: accounts[0]!, amount: 7n },
      });
    });
    await publishAll();
    expect(consumer.stats.applied).toBe(2);
    const next = await ledger();
    await next.done.reached(1);
    expect(await w.balances(accounts)).toEqual({ [accounts[0]!]: 8n, [accounts[1]!]: 1n });
  });

  it("checks its options, and reports a stream it cannot consume", async () => {
    const bad = await consumeEvents({ consumer: "a.b", concurrency: 0 } as never).catch((e) => e);
    expect(bad).toBeInstanceOf(NatsOptionsError);
    expect(bad.issues.join("\n")).toMatch(
      /durable[\s\S]*stream[\s\S]*db[\s\S]*shardOf[\s\S]*apply[\s\S]*concurrency/,
    );
    const missing = await ledger({ stream: `${n.stream}_MISSING` }).catch((e) => e);
    expect(missing).toBeInstanceOf(JetStreamSetupError);
  });
});
