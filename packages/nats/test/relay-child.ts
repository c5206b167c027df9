// A relay process for the "killed after publishing" test: it publishes each event it claims through
// the JetStream sink, prints "published <id>" once JetStream acked it, and then never returns from
// `deliver`, so the relay never marks the event delivered (the parent SIGKILLs it).

import { createOutboxRelay } from "@shardkit/prisma";
import { jetStreamSink } from "../src/index.js";
import { startChild } from "./child.js";

type Options = { prefix: string; stream: string; leaseMs: number };
const { options, nc, clients, registry } = await startChild<Options>("SINK_CHILD");
const { prefix, stream, leaseMs } = options;
const publish = jetStreamSink({ connection: nc, prefix, stream, timeoutMs: 800 });
let published = 0;
const relay = createOutboxRelay({
  registry,
  leaseMs,
  deliveryTimeoutMs: 1000,
  deliver: async (message) => {
    await publish(message);
    process.stdout.write(`published ${message.id} ${++published}\n`);
    await new Promise(() => {});
  },
});
// Connected and warm before the claim: a claim that took long would leave too little of the lease
// to deliver in, and the relay would release its events unsent.
for (const client of clients) await client.$queryRawUnsafe("SELECT 1");
await relay.runOnce();
