import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createOutboxRelay, decodeJson, type OutboxMessage } from "@shardkit/prisma";
import { patient, within } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { describe, expect, inject, it } from "vitest";
import { privateNatsServer } from "../test/nats-server.js";
import type { Deposit, NatsScope, World } from "../test/world.js";
import { outboxMessages, perTestWorld, recordingSink, S, spawnChild, TOPIC } from "../test/world.js";
import {
  BrokerUnavailableError,
  InvalidSubjectError,
  NatsOptionsError,
  NoStreamError,
  PublishRejectedError,
  PublishTimeoutError,
} from "./errors.js";
import { EVENT_HEADERS, isRetryableDelivery, jetStreamSink, type PublishReceipt } from "./sink.js";
import { ensureStream } from "./stream.js";

let w: World;
let n: NatsScope;
perTestWorld("sink", (world, nats) => {
  [w, n] = [world, nats];
});

/** A relay over the test shards with `deliver`, retrying what isRetryableDelivery says (no waiting). */
function relayWith(deliver: (m: OutboxMessage) => Promise<unknown>, options: { maxAttempts?: number } = {}) {
  return createOutboxRelay({
    registry: w.registry,
    deliver: async (m) => void (await deliver(m)),
    retryable: isRetryableDelivery,
    backoff: { baseMs: 1, maxMs: 1 },
    logger: { warn: () => {} },
    ...options,
  });
}

/** Runs the relay until it has delivered `n` events in all. */
async function deliverAll(relay: ReturnType<typeof relayWith>, n: number) {
  let delivered = 0;
  await eventually(`the relay delivers ${n} events`, async () => {
    const report = await relay.runOnce();
    delivered += report.databases.reduce((sum, d) => sum + d.delivered, 0);
    return delivered >= n;
  });
  return delivered;
}

describe("jetStreamSink through the outbox relay", () => {
  it("publishes each event once with its ID as Nats-Msg-Id, the event headers and its payload; the outbox marks it delivered", async () => {
    const accounts = await w.seed(3, (i) => 10n ** 18n + BigInt(i)); // bigints beyond 2^53 survive
    const { publish } = recordingSink({ connection: n.nc, prefix: n.prefix, stream: n.stream });
    const receipts: PublishReceipt[] = [];
    const relay = relayWith(async (m) => receipts.push(await publish(m)));
    const report = await relay.runOnce();
    expect(report.databases.map((d) => d.delivered)).toEqual([3, 3]);
    expect(receipts.every((r) => r.stream === n.stream && !r.duplicate && r.subject === n.subject)).toBe(
      true,
    );

    const outbox = await w.outbox();
    expect(outbox.map((e) => e.status)).toEqual(Array(6).fill("delivered"));
    const stored = await n.stored();
    expect(stored).toHaveLength(6);
    const byId = new Map(outbox.map((e) => [e.id, e]));
    for (const m of stored) {
      const event = byId.get(m.header.get(EVENT_HEADERS.id))!;
      expect(event, "every stored message is an outbox event").toBeDefined();
      expect(m.subject).toBe(`${n.prefix}.${TOPIC}`);
      expect(m.header.get(EVENT_HEADERS.topic)).toBe(TOPIC);
      expect(m.header.get(EVENT_HEADERS.aggregateId)).toBe(event.aggregateId);
      expect(m.header.get(EVENT_HEADERS.shard)).toBe(event.aggregateId === accounts[0] ? S.a.key : S.b.key);
      expect(m.header.get(EVENT_HEADERS.createdAt)).toBe(event.createdAt.toISOString());
      const payload = decodeJson<Deposit>(new TextDecoder().decode(m.data));
      expect(payload.account).toBe(event.aggregateId);
      expect(typeof payload.amount).toBe("bigint");
    }
    // One aggregate's events in the order they were written (the relay's lanes).
    for (const account of accounts) {
      const amounts = stored
        .filter((m) => m.header.get(EVENT_HEADERS.aggregateId) === account)
        .map((m) => decodeJson<Deposit>(new TextDecoder().decode(m.data)).amount);
      expect(amounts).toEqual([10n ** 18n, 10n ** 18n + 1n, 10n ** 18n + 2n]);
    }
  });

  it("a relay that delivers an event twice: JetStream stores it once and acks the second publish as a duplicate", async () => {
    await w.seed(2);
    const { publish } = recordingSink({ connection: n.nc, prefix: n.prefix });
    const pairs: [PublishReceipt, PublishReceipt][] = [];
    const relay = relayWith(async (m) => pairs.push([await publish(m), await publish(m)]));
    await relay.runOnce();
    expect(pairs).toHaveLength(4);
    for (const [first, again] of pairs) {
      expect(first.duplicate).toBe(false);
      expect(again).toEqual({ ...first, duplicate: true }); // the sequence of the copy stored first
    }
    expect(await n.stored()).toHaveLength(4);
    expect((await w.outbox()).every((e) => e.status === "delivered")).toBe(true);
  });

  it(
    "a relay killed after publishing, before it marked the events delivered: the next relay's publishes are duplicates, each event is stored once",
    async () => {
      await w.seed(1); // one event on each shard database
      const { child, exited } = spawnChild("relay-child.ts", "SINK_CHILD", w, {
        prefix: n.prefix,
        stream: n.stream,
        leaseMs: 2500,
      });
      const published = await within(
        new Promise<string[]>((resolve, reject) => {
          let out = "";
          child.stdout!.on("data", (chunk: Buffer) => {
            out += chunk.toString();
            const lines = out.split("\n").filter((l) => l.startsWith("published "));
            if (lines.length === 2) resolve(lines.map((l) => l.split(" ")[1]!));
          });
          child.once("exit", (code) => reject(new Error(`relay child exited early (${code})`)));
        }),
        45_000, // a process start (tsx, Prisma, NATS) can take long on a busy machine
        "the relay child publishing both events",
      );
      child.kill("SIGKILL");
      await exited;
      expect((await w.outbox()).map((e) => e.status)).toEqual(["pending", "pending"]);
      expect(await n.stored()).toHaveLength(2);

      // The killed relay's lease ends (2.5 s); this relay claims the events again and publishes them again.
      const { publish } = recordingSink({ connection: n.nc, prefix: n.prefix, stream: n.stream });
      const receipts: { id: string; receipt: PublishReceipt }[] = [];
      const relay = relayWith(async (m) => receipts.push({ id: m.id, receipt: await publish(m) }));
      await deliverAll(relay, 2);
      expect(receipts.map((r) => r.id).sort()).toEqual([...published].sort());
      expect(receipts.every((r) => r.receipt.duplicate)).toBe(true);
      expect(await n.stored()).toHaveLength(2);
      expect((await w.outbox()).map((e) => e.status)).toEqual(["delivered", "delivered"]);
    },
    patient(90_000),
  );

  it(
    "the NATS server down: deliver throws, the events stay pending (never dead); once it is back the relay delivers each once",
    async () => {
      const server = await privateNatsServer();
      const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
      try {
        const jsStream = `${n.stream}_PRIVATE`;
        await ensureStream(nc, { name: jsStream, subjects: [`${n.prefix}.>`] });
        await w.seed(1);
        const publish = jetStreamSink({ connection: nc, prefix: n.prefix, stream: jsStream, timeoutMs: 300 });
        await server.stop();

        const [message] = await probeMessages();
        await expect(publish(message!)).rejects.toBeInstanceOf(PublishTimeoutError);
        // maxAttempts 1: any failure that is not retryable would be a dead letter at once.
        const relay = relayWith(publish, { maxAttempts: 1 });
        const down = await relay.runOnce();
        expect(down.databases.map((d) => [d.delivered, d.retried, d.dead])).toEqual([
          [0, 1, 0],
          [0, 1, 0],
        ]);
        const pending = await w.outbox();
        expect(pending.map((e) => e.status)).toEqual(["pending", "pending"]);
        expect(pending.every((e) => e.lastError?.includes("did not acknowledge"))).toBe(true);

        await server.start();
        await deliverAll(relay, 2);
        expect((await w.outbox()).map((e) => e.status)).toEqual(["delivered", "delivered"]);
        const info = await (await jetstreamManager(nc)).streams.info(jsStream);
        expect(info.state.messages).toBe(2);
      } finally {
        await nc.close();
        await server.dispose();
      }
    },
    patient(60_000),
  );
});

const probeMessages = () => outboxMessages(w);

describe("jetStreamSink failures", () => {
  it("no stream captures the subject: NO_STREAM, retryable (the event waits in the outbox)", async () => {
    await w.seed(1);
    const publish = jetStreamSink({ connection: n.nc, prefix: `${n.prefix}_nostream` });
    const [message] = await probeMessages();
    const error = await publish(message!).catch((e) => e);
    expect(error).toBeInstanceOf(NoStreamError);
    expect(error.subject).toBe(`${n.prefix}_nostream.${TOPIC}`);
    expect(isRetryableDelivery(error)).toBe(true);
    const relay = relayWith(publish, { maxAttempts: 1 });
    expect((await relay.runOnce()).databases.map((d) => d.dead)).toEqual([0, 0]);
    expect((await w.outbox()).map((e) => e.status)).toEqual(["pending", "pending"]);
  });

  it("captured by another stream than `stream`: PUBLISH_REJECTED, a dead letter after maxAttempts (nothing stored)", async () => {
    await w.seed(1);
    const publish = jetStreamSink({ connection: n.nc, prefix: n.prefix, stream: "SOME_OTHER_STREAM" });
    const [message] = await probeMessages();
    const error = await publish(message!).catch((e) => e);
    expect(error).toBeInstanceOf(PublishRejectedError);
    expect(error.apiCode).toBe(10060); // JetStream: expected stream does not match
    expect(isRetryableDelivery(error)).toBe(false);
    const relay = relayWith(publish, { maxAttempts: 1 });
    expect((await relay.runOnce()).databases.map((d) => d.dead)).toEqual([1, 1]);
    expect((await w.outbox()).map((e) => e.status)).toEqual(["dead", "dead"]);
    expect(await n.stored()).toHaveLength(0);
  });

  it("a topic that makes no valid subject: INVALID_SUBJECT, before anything is sent", async () => {
    await w.seed(1);
    const [message] = await probeMessages();
    const publish = jetStreamSink({ connection: n.nc, prefix: n.prefix });
    for (const topic of ["has space", "trailing.", "a..b", "wild.*", "wild.>", ""]) {
      const error = await publish({ ...message!, topic }).catch((e) => e);
      expect(error, topic).toBeInstanceOf(InvalidSubjectError);
      expect(isRetryableDelivery(error)).toBe(false);
    }
    const custom = recordingSink({
      connection: n.nc,
      subject: (m) => `${n.prefix}.by-shard.${m.shard.bits}.${m.topic}`,
    });
    expect((await custom.publish(message!)).subject).toBe(
      `${n.prefix}.by-shard.${message!.shard.bits}.${TOPIC}`,
    );
  });

  it("a closed connection: BROKER_UNAVAILABLE, retryable", async () => {
    await w.seed(1);
    const [message] = await probeMessages();
    const nc = await connect({ servers: inject("natsUrl") });
    const publish = jetStreamSink({ connection: nc, prefix: n.prefix });
    await nc.close();
    const error = await publish(message!).catch((e) => e);
    expect(error).toBeInstanceOf(BrokerUnavailableError);
    expect(isRetryableDelivery(error)).toBe(true);
  });

  it("isRetryableDelivery keeps the relay's own default: a delivery that timed out stays pending", async () => {
    await w.seed(1);
    const relay = createOutboxRelay({
      registry: w.registry,
      deliver: () => new Promise(() => {}),
      deliveryTimeoutMs: 100,
      leaseMs: 5000,
      maxAttempts: 1,
      retryable: isRetryableDelivery,
      logger: { warn: () => {} },
    });
    expect((await relay.runOnce()).databases.map((d) => [d.retried, d.dead])).toEqual([
      [1, 0],
      [1, 0],
    ]);
    expect(isRetryableDelivery(new Error("anything else"))).toBe(false);
  });

  it("checks its options", () => {
    const bad = () => jetStreamSink({ connection: {} as never, prefix: "a b", timeoutMs: 0, stream: "x.y" });
    expect(bad).toThrow(NatsOptionsError);
    try {
      bad();
    } catch (error) {
      expect((error as NatsOptionsError).issues).toHaveLength(4);
    }
  });
});
