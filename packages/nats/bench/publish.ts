// pnpm bench (in packages/nats): what the JetStream sink and the consumer cost, each figure a
// ratio against a baseline measured in the same run, on the machine's NATS server (JetStream, file
// storage) and PostgreSQL over loopback. Variants run in interleaved rounds (A B C ..., A B C ...)
// so noise hits all alike; the median round of each is reported.
//
//   publish: messages/s of
//     1. a bare core-NATS publish (no ack; one flush at the end)
//     2. a JetStream publish awaiting its ack, one at a time
//     3. the same with a Nats-Msg-Id (JetStream then tracks the ID for its duplicate window): the baseline
//     4. jetStreamSink's deliver (Nats-Msg-Id, event headers, JSON payload), one at a time
//     5. jetStreamSink's deliver with 8 in flight (the relay's default deliveryConcurrency)
//     6. jetStreamSink's deliver of events the stream already holds (duplicate acks), one at a time
//   relay: events/s of createOutboxRelay draining an outbox of BENCH_EVENTS events from PostgreSQL
//     with a no-op deliver (the baseline), vs with jetStreamSink
//   consumer: events/s of consumeEvents applying each event in its own shard transaction
//     (consumeOnce + one update) and then acking, with concurrency 1 and 8 (its default; 50
//     aggregates), vs the same transactions run one after another with no NATS at all (the
//     baseline), and a pull consumer that only acks
//
// The bench database runs with synchronous_commit = off, so commit figures measure round trips and
// CPU rather than this machine's fsync.
//
// BENCH_MESSAGES (default 2000) per publish round, BENCH_EVENTS (default 1000), BENCH_ROUNDS (default 3).

import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { headers } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import {
  consumeOnce,
  createOutboxRelay,
  createShardRegistry,
  emitEvent,
  type OutboxMessage,
  shardRouting,
} from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT } from "@shardkit/test-db";
import { PrismaClient } from "../examples/generated/prisma/client.js";
import { consumeEvents, ensureStream, jetStreamSink } from "../src/index.js";

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 2000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const run = `${process.pid}`;
const stream = `SK_BENCH_${run}`;
const prefix = `skbench_${run}`;
const shard = ShardIdentifier.of(0, 0);

const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
await ensureStream(nc, { name: stream, subjects: [`${prefix}.>`] });
await ensureCluster("main", MAIN_PORT);
const dbName = `sk_bench_nats_${run}`;
const url = await createDatabase(MAIN_PORT, dbName);
{
  const admin = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
  await admin.$executeRawUnsafe(`ALTER DATABASE "${dbName}" SET synchronous_commit = off`);
  await admin.$disconnect();
}
const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }), errorFormat: "minimal" });
try {
  await bench();
} finally {
  await client.$disconnect();
  await dropDatabase(MAIN_PORT, dbName);
  const jsm = await jetstreamManager(nc);
  for (const name of [stream, `${stream}_C`]) await jsm.streams.delete(name).catch(() => {});
  await nc.close();
}

function median(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function message(i: number): OutboxMessage {
  const aggregateId = ShardedId.generate("Account", shard) as string;
  return {
    id: ShardedUUID.generate(shard),
    topic: "account.deposited",
    aggregateId,
    payload: { account: aggregateId, amount: BigInt(i), note: "a deposit of a typical size" },
    createdAt: new Date(),
    attempts: 0,
    shard,
  };
}

/** Runs each variant once per round, interleaved; returns the median rate (per second) of each. */
async function rounds(variants: Record<string, () => Promise<number>>): Promise<Record<string, number>> {
  const rates: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, fn] of Object.entries(variants)) rates[name]!.push(await fn());
  }
  return Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, median(v)]));
}

async function timed(count: number, fn: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await fn();
  return count / ((performance.now() - start) / 1000);
}

async function bench() {
  const js = jetstream(nc);
  const sink = jetStreamSink({ connection: nc, prefix, stream });
  const subject = `${prefix}.account.deposited`;
  const body = JSON.stringify({
    account: "x",
    amount: { $bigint: "1" },
    note: "a deposit of a typical size",
  });
  const stored: OutboxMessage[] = [];
  for (let i = 0; i < 200; i++) stored.push(message(i));
  for (const m of stored) await sink(m);
  // warm-up
  for (let i = 0; i < 200; i++) await sink(message(i));

  const publish = await rounds({
    "core publish, no ack": () =>
      timed(MESSAGES, async () => {
        const h = headers();
        for (let i = 0; i < MESSAGES; i++) nc.publish(subject, body, { headers: h });
        await nc.flush();
      }),
    "JetStream publish, ack awaited": () =>
      timed(MESSAGES, async () => {
        for (let i = 0; i < MESSAGES; i++) await js.publish(subject, body);
      }),
    "JetStream publish + msgID, ack": () =>
      timed(MESSAGES, async () => {
        for (let i = 0; i < MESSAGES; i++)
          await js.publish(subject, body, { msgID: ShardedUUID.generate(shard) });
      }),
    "jetStreamSink, 1 in flight": () =>
      timed(MESSAGES, async () => {
        for (let i = 0; i < MESSAGES; i++) await sink(message(i));
      }),
    "jetStreamSink, 8 in flight": () =>
      timed(MESSAGES, async () => {
        let next = 0;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (next < MESSAGES) await sink(message(next++));
          }),
        );
      }),
    "jetStreamSink, duplicates": () =>
      timed(MESSAGES, async () => {
        for (let i = 0; i < MESSAGES; i++) await sink(stored[i % stored.length]!);
      }),
  });
  const base = publish["JetStream publish + msgID, ack"]!;
  console.log(`publish (${MESSAGES} messages a round, median of ${ROUNDS} rounds)`);
  for (const [name, rate] of Object.entries(publish)) {
    console.log(
      `  ${name.padEnd(32)} ${Math.round(rate).toString().padStart(8)}/s  ${(rate / base).toFixed(3)}x`,
    );
  }

  // The relay over PostgreSQL.
  await rolloutSchema({
    schema: new URL("../examples/schema.prisma", import.meta.url).pathname,
    targets: [{ name: dbName, adapter: new PrismaPg({ connectionString: url }) }],
    onProgress: () => {},
  });
  const registry = createShardRegistry({ shards: [{ shard, client }] });
  const db = client.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));
  const accounts = Array.from({ length: 50 }, () => ShardedId.generate("Account", shard) as string);
  await db.$transactionOn(shard, async (tx) => {
    await tx.account.createMany({ data: accounts.map((id) => ({ id })) });
  });
  const seed = async () => {
    await client.$executeRawUnsafe('TRUNCATE "OutboxEvent"');
    for (let i = 0; i < EVENTS; i += 100) {
      await db.$transactionOn(shard, async (tx) => {
        for (let j = i; j < Math.min(EVENTS, i + 100); j++) {
          const account = accounts[j % accounts.length]!;
          await emitEvent(tx, account, {
            topic: "account.deposited",
            aggregateId: account,
            payload: { account, amount: BigInt(j) },
          });
        }
      });
    }
  };
  const drain = async (deliver: (m: OutboxMessage) => Promise<unknown>) => {
    await seed();
    const relay = createOutboxRelay({ registry, deliver: async (m) => void (await deliver(m)) });
    return timed(EVENTS, async () => {
      let delivered = 0;
      while (delivered < EVENTS) {
        delivered += (await relay.runOnce()).databases.reduce((s, d) => s + d.delivered, 0);
      }
    });
  };
  const relay = await rounds({
    "no-op deliver": () => drain(async () => {}),
    jetStreamSink: () => drain(sink),
  });
  console.log(`relay (${EVENTS} events, 50 aggregates, deliveryConcurrency 8, median of ${ROUNDS} rounds)`);
  for (const [name, rate] of Object.entries(relay)) {
    console.log(
      `  ${name.padEnd(32)} ${Math.round(rate).toString().padStart(8)}/s  ${(rate / relay["no-op deliver"]!).toFixed(3)}x`,
    );
  }

  // The consumer: EVENTS events published, then drained by a new durable of each kind.
  const consumerStream = `${stream}_C`;
  const consumerPrefix = `${prefix}_c`;
  await ensureStream(nc, { name: consumerStream, subjects: [`${consumerPrefix}.>`] });
  const csink = jetStreamSink({ connection: nc, prefix: consumerPrefix, stream: consumerStream });
  for (let j = 0; j < EVENTS; j++) {
    const account = accounts[j % accounts.length]!;
    await csink({ ...message(j), aggregateId: account, payload: { account, amount: BigInt(j) } });
  }
  const jsm = await jetstreamManager(nc);
  let durables = 0;
  const ackOnly = async () => {
    const durable = `ack_${++durables}`;
    await jsm.consumers.add(consumerStream, { durable_name: durable, ack_policy: AckPolicy.Explicit });
    const consumer = await js.consumers.get(consumerStream, durable);
    return timed(EVENTS, async () => {
      const messages = await consumer.consume({ max_messages: 64 });
      let seen = 0;
      for await (const m of messages) {
        m.ack();
        if (++seen === EVENTS) break;
      }
      await nc.flush();
    });
  };
  const applying = (concurrency: number) => async () => {
    const durable = `ledger_${++durables}`;
    let seen = 0;
    let all = () => {};
    const done = new Promise<void>((resolve) => {
      all = resolve;
    });
    return timed(EVENTS, async () => {
      const consumer = await consumeEvents({
        connection: nc,
        stream: consumerStream,
        consumer: durable,
        concurrency,
        db,
        shardOf: (event) => (event.payload as { account: string }).account,
        apply: async (tx, event) => {
          const { account, amount } = event.payload as { account: string; amount: bigint };
          await tx.account.update({ where: { id: account }, data: { balance: { increment: amount } } });
        },
        onEvent: () => {
          if (++seen === EVENTS) all();
        },
      });
      await done;
      await consumer.stop();
    });
  };
  let loops = 0;
  const transactionsOnly = async () => {
    const consumer = `loop_${++loops}`;
    const events = Array.from({ length: EVENTS }, (_, j) => ({
      id: ShardedUUID.generate(shard),
      account: accounts[j % accounts.length]!,
      amount: BigInt(j),
    }));
    return timed(EVENTS, async () => {
      for (const e of events) {
        await db.$transactionOn(e.account, async (tx) => {
          if (!(await consumeOnce(tx, e.account, consumer, e.id))) return;
          await tx.account.update({ where: { id: e.account }, data: { balance: { increment: e.amount } } });
        });
      }
    });
  };
  const consume = await rounds({
    "the transactions alone, no NATS": transactionsOnly,
    "pull + ack only": ackOnly,
    "consumeEvents, concurrency 1": applying(1),
    "consumeEvents, concurrency 8": applying(8),
  });
  console.log(`consumer (${EVENTS} events, median of ${ROUNDS} rounds)`);
  for (const [name, rate] of Object.entries(consume)) {
    console.log(
      `  ${name.padEnd(32)} ${Math.round(rate).toString().padStart(8)}/s  ${(rate / consume["the transactions alone, no NATS"]!).toFixed(3)}x`,
    );
  }
}
