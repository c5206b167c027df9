import { PGlite } from "@electric-sql/pglite";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import {
  consumeEvents,
  ensureStream,
  isRetryableDelivery,
  jetStreamSink,
  type ReceivedEvent,
} from "@shardkit/nats";
import { createOutboxRelay, createShardRegistry, emitEvent, shardRouting } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/prisma/client.js";

// A NATS server with JetStream (NATS_URL, default 127.0.0.1:4222), and a stream of this run's own.
const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
const stream = `EXAMPLE_${process.pid}`;
const prefix = `example_${process.pid}`; // subjects: example_<pid>.<topic>
await ensureStream(nc, { name: stream, subjects: [`${prefix}.>`], duplicateWindowMs: 120_000 });

// One embedded shard database holding shard 0/1, with an account on it.
const pglite = new PGlite();
await rolloutSchema({
  schema: new URL("./schema.prisma", import.meta.url).pathname,
  targets: [{ name: "shard", adapter: new PrismaPGlite(pglite) }],
  onProgress: () => {},
});
const client = new PrismaClient({ adapter: new PrismaPGlite(pglite) });
const shard = ShardIdentifier.of(0, 1);
const registry = createShardRegistry({ shards: [{ shard, client }] });
const db = client.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));
const account = ShardedId.generate("Account", shard) as string;

// The producer: state and its events in one shard transaction (the outbox).
type Deposit = { account: string; amount: bigint };
await db.$transactionOn(account, async (tx) => {
  await tx.account.create({ data: { id: account } });
  for (const amount of [100n, 250n]) {
    const payload: Deposit = { account, amount };
    await emitEvent(tx, account, { topic: "account.deposited", aggregateId: account, payload });
  }
});

// The relay publishes each event to JetStream and waits for its ack. Here every event is
// published twice, as a relay that died before recording its delivery would do.
let duplicates = 0;
const publish = jetStreamSink({
  connection: nc,
  prefix,
  stream,
  onPublished: (_message, receipt) => {
    if (receipt.duplicate) duplicates++; // JetStream already held it (same Nats-Msg-Id)
  },
});
const relay = createOutboxRelay({
  registry,
  retryable: isRetryableDelivery, // a broker that is down: retry, never dead-letter
  deliver: async (message) => {
    await publish(message);
    await publish(message);
  },
});
const [polled] = (await relay.runOnce()).databases;
console.log(
  `relay: ${polled?.delivered} events delivered, ${duplicates} second publishes acked as duplicates`,
);

/** The ledger: on durable consumer `durable`, until it has seen `events` events (10 s at most). */
async function ledger(durable: string, events: number) {
  const outcomes: string[] = [];
  let allSeen = () => {};
  const seen = new Promise<void>((resolve, reject) => {
    allSeen = resolve;
    setTimeout(
      () => reject(new Error(`${durable} saw ${outcomes.length} of ${events} events`)),
      10_000,
    ).unref();
  });
  const consumer = await consumeEvents({
    connection: nc,
    stream,
    consumer: "ledger", // the name consumeOnce records applied events under
    durable,
    db, // each event: one $transactionOn(shardOf(event)) runs consumeOnce, then apply; then the ack
    shardOf: (event: ReceivedEvent<Deposit>) => event.payload.account,
    apply: async (tx, event) => {
      await tx.account.update({
        where: { id: event.payload.account },
        data: { balance: { increment: event.payload.amount } },
      });
    },
    onEvent: (_event, outcome) => {
      outcomes.push(outcome);
      if (outcomes.length === events) allSeen();
    },
  });
  await seen;
  await consumer.stop();
  const { balance } = await db.account.findUniqueOrThrow({ where: { id: account } });
  const applied = outcomes.filter((o) => o === "applied").length;
  console.log(`${durable}: ${applied} applied, ${outcomes.length - applied} recognised, balance ${balance}`);
}

await ledger("ledger", 2);
// A durable created anew (reset by an operator, say) reads the stream from its start again:
// every event is recognised and only acked.
await ledger("ledger-replay", 2);

await (await jetstreamManager(nc)).streams.delete(stream);
await nc.close();
await registry.disconnect();
await pglite.close();
