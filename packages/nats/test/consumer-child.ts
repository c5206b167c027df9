// A consumer process for the "killed between applying and acking" test: it applies events through
// consumeEvents, and once the first event's transaction has committed it prints "committed <id>"
// and stops there, before the ack (the parent SIGKILLs it).

import { type ShardRef, shardRouting } from "@shardkit/prisma";
import { consumeEvents } from "../src/index.js";
import { startChild } from "./child.js";
import type { Deposit } from "./world.js";

type Options = { stream: string; consumer: string; ackWaitMs: number };
const { options, nc, clients, registry } = await startChild<Options>("CONSUMER_CHILD");
const { stream, consumer, ackWaitMs } = options;
const db = clients[0]!.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));
let current = "";
// The routed client, with a pause after each commit: the process dies there, before its ack.
const dying = {
  async $transactionOn<R>(
    shard: ShardRef,
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
