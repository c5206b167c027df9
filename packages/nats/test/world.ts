// The test world: two shard databases (0/0 on a, 0/1 on b) behind a routed client, a connection to
// the machine's NATS server, and a stream and subjects of each test's own, deleted afterwards.

import { spawn } from "node:child_process";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import {
  createShardRegistry,
  decodeJson,
  emitEvent,
  type OutboxMessage,
  shardRouting,
} from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { afterAll, afterEach, beforeAll, beforeEach, inject, onTestFinished } from "vitest";
import { PrismaClient } from "../examples/generated/prisma/client.js";
import { ensureStream, type JetStreamSinkOptions, jetStreamSink, type PublishReceipt } from "../src/index.js";

export const S = { a: ShardIdentifier.of(0, 0), b: ShardIdentifier.of(0, 1) };
export const TOPIC = "account.deposited";
export type Deposit = { account: string; amount: bigint };

/**
 * Each test file that writes to the shard databases has a pair of its own (files run side by side).
 * `pair` names it: "sink" or "consume".
 */
export function makeWorld(pair: keyof ReturnType<typeof inject<"natsShardUrls">>) {
  const urls = inject("natsShardUrls")[pair];
  const clients = {
    a: new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.a }) }),
    b: new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.b }) }),
  };
  const registry = createShardRegistry({
    shards: [
      { shard: S.a, client: clients.a },
      { shard: S.b, client: clients.b },
    ],
  });
  const db = clients.a.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));
  return {
    urls,
    clients,
    registry,
    db,
    async truncate() {
      for (const client of Object.values(clients)) {
        await client.$executeRawUnsafe('TRUNCATE "Account", "OutboxEvent", "ProcessedEvent"');
      }
    },
    /** One account per shard, each with `perAccount` deposits written with it (one transaction). */
    async seed(perAccount: number, amount = (i: number) => BigInt(i + 1)) {
      const accounts: string[] = [];
      for (const shard of [S.a, S.b]) {
        const account = ShardedId.generate("Account", shard) as string;
        accounts.push(account);
        await db.$transactionOn(account, async (tx) => {
          await tx.account.create({ data: { id: account } });
          for (let i = 0; i < perAccount; i++) {
            const payload: Deposit = { account, amount: amount(i) };
            await emitEvent(tx, account, { topic: TOPIC, aggregateId: account, payload });
          }
        });
      }
      return accounts;
    },
    async outbox() {
      const rows = [];
      for (const client of Object.values(clients)) rows.push(...(await client.outboxEvent.findMany()));
      return rows;
    },
    async balances(accounts: string[]) {
      const out: Record<string, bigint> = {};
      for (const id of accounts) {
        out[id] = (await db.account.findUniqueOrThrow({ where: { id } })).balance;
      }
      return out;
    },
    async processed() {
      let n = 0;
      for (const client of Object.values(clients)) n += await client.processedEvent.count();
      return n;
    },
    close: () => registry.disconnect(),
  };
}

export type World = ReturnType<typeof makeWorld>;

/** The seeded events as the relay hands them to `deliver` (without delivering them). */
export async function outboxMessages(w: World): Promise<OutboxMessage[]> {
  return (await w.outbox()).map((e) => ({
    id: e.id,
    topic: e.topic,
    aggregateId: e.aggregateId,
    payload: decodeJson(e.payload),
    createdAt: e.createdAt,
    attempts: e.attempts,
    shard: ShardedUUID.shardOf(e.id),
  }));
}

let runs = 0;

/** A connection to the machine's NATS server, and names of this test's own (unique per run). */
export async function natsScope() {
  const run = `${process.pid}_${++runs}_${Date.now().toString(36)}`;
  const nc = await connect({ servers: inject("natsUrl") });
  const stream = `SK_NATS_${run}`;
  const prefix = `sknats_${run}`;
  const streams: string[] = [];
  return {
    nc,
    stream,
    prefix,
    subject: `${prefix}.${TOPIC}`,
    /** This test's stream (or another of its own), capturing `${prefix}.>`, deleted by `close()`. */
    async createStream(options: { name?: string; duplicateWindowMs?: number; subjects?: string[] } = {}) {
      const name = options.name ?? stream;
      streams.push(name);
      return ensureStream(nc, {
        name,
        subjects: options.subjects ?? [`${prefix}.>`],
        ...(options.duplicateWindowMs ? { duplicateWindowMs: options.duplicateWindowMs } : {}),
      });
    },
    /** The messages the stream holds now, in order. */
    async stored(name = stream) {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(name);
      const out = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const m = await jsm.streams.getMessage(name, { seq });
        if (m) out.push(m);
      }
      return out;
    },
    async close() {
      if (!nc.isClosed()) {
        const jsm = await jetstreamManager(nc);
        for (const name of streams) await jsm.streams.delete(name).catch(() => {});
        await nc.close();
      }
    },
  };
}

export type NatsScope = Awaited<ReturnType<typeof natsScope>>;

/**
 * The hooks of a test file over the shards of `pair` and NATS: the world made once (closed after
 * the file) and emptied before each test, which gets its own NATS scope and stream (closed after
 * it; hooks the file registers later run before that close). `use` receives both before each test.
 */
export function perTestWorld(pair: Parameters<typeof makeWorld>[0], use: (w: World, n: NatsScope) => void) {
  let w: World;
  let n: NatsScope;
  beforeAll(() => {
    w = makeWorld(pair);
  });
  afterAll(() => w.close());
  beforeEach(async () => {
    await w.truncate();
    n = await natsScope();
    await n.createStream();
    use(w, n);
  });
  afterEach(() => n.close());
}

/**
 * Resolves when `count()` reaches `n` (checked on each `tick()`), or rejects after
 * `patient(timeoutMs)` (scaled when the wait starts): a bounded wait for consumer outcomes, driven by
 * the consumer's own callbacks.
 */
export function counter(timeoutMs = 15_000) {
  const waiters: { n: number; resolve: () => void }[] = [];
  let value = 0;
  return {
    get value() {
      return value;
    },
    tick() {
      value++;
      for (const w of [...waiters]) if (value >= w.n) w.resolve();
    },
    reached(n: number, what = `${n} outcomes`): Promise<void> {
      if (value >= n) return Promise.resolve();
      const limit = patient(timeoutMs);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out after ${limit} ms waiting for ${what} (at ${value})`)),
          limit,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

export type { NatsConnection };

/** jetStreamSink with its receipts recorded: `publish(m)` delivers and returns JetStream's answer. */
export function recordingSink(options: JetStreamSinkOptions) {
  const receipts: { id: string; receipt: PublishReceipt }[] = [];
  const latest = new Map<string, PublishReceipt>();
  const deliver = jetStreamSink({
    ...options,
    onPublished: (message, receipt) => {
      receipts.push({ id: message.id, receipt });
      latest.set(message.id, receipt);
    },
  });
  return {
    deliver,
    receipts,
    async publish(message: OutboxMessage): Promise<PublishReceipt> {
      await deliver(message);
      return latest.get(message.id)!;
    },
  };
}

/**
 * Runs `test/<script>` (which reads its options with `startChild(variable)`) in its own process over
 * the world's shards and the machine's NATS, with `options`; SIGKILLed when the test ends if it still
 * runs. `exited` settles when it has.
 */
export function spawnChild(script: string, variable: string, w: World, options: object) {
  const child = spawn(process.execPath, ["--import", "tsx", `test/${script}`], {
    cwd: new URL("..", import.meta.url).pathname,
    env: {
      ...process.env,
      [variable]: JSON.stringify({
        urls: [w.urls.a, w.urls.b],
        shards: [S.a.key, S.b.key],
        natsUrl: inject("natsUrl"),
        ...options,
      }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return { child, exited };
}
