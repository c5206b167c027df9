// A consumer process for the "killed between applying and acking" test: it applies events through
// consumeEvents, and once the first event's transaction has committed it prints "committed <id>"
// and stops there, before the ack (the parent SIGKILLs it).

import { connect } from "@nats-io/transport-node";
import { PrismaPg } from "@prisma/adapter-pg";
import { createShardRegistry, type ShardOrId, shardRouting } from "@shardkit/prisma";
import { PrismaClient } from "../examples/generated/prisma/client.js";
import { consumeEvents } from "../src/index.js";
import type { Deposit } from "./world.js";

const { urls, shards, natsUrl, stream, consumer, ackWaitMs } = JSON.parse(process.env.CONSUMER_CHILD!) as {
  urls: string[];
  shards: string[];
  natsUrl: string;
  stream: string;
  consumer: string;
  ackWaitMs: number;
};
const nc = await connect({ servers: natsUrl });
const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
const registry = createShardRegistry({
  shards: shards.map((shard, i) => ({ shard, client: clients[i]! })),
});
const db = clients[0]!.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));
let current = "";
// The routed client, with a pause after each commit: the process dies there, before its ack.
const dying = {
  async $transactionOn<R>(
    shard: ShardOrId,
    fn: (tx: Parameters<Parameters<typeof db.$transactionOn>[1]>[0]) => Promise<R>,
  ) {
    const result = await db.$transactionOn(shard, fn);
    process.stdout.write(`committed ${current}\n`);
    await new Promise(() => {});
    return result;
  },
};
await consumeEvents<Parameters<Parameters<typeof db.$transactionOn>[1]>[0], Deposit>({
  connection: nc,
  stream,
  consumer,
  ackWaitMs,
  concurrency: 1, // one event in hand: the process dies with exactly one committed, unacked event
  db: dying,
  shardOf: (event) => {
    current = event.id;
    return event.payload.account;
  },
  apply: async (tx, event) => {
    await tx.account.update({
      where: { id: event.payload.account },
      data: { balance: { increment: event.payload.amount } },
    });
  },
});
