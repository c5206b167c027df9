// A second relay for the conservation soak, in its own process, competing with the service's own
// relay: it delivers every event twice (a duplicate delivery) and every HANG_EVERY-th delivery never
// finishes (a hung consumer: its delivery times out and the event is claimed again). It prints
// "delivered" and "hung" lines, and exits when its parent goes away (its stdin closes).
import { createOutboxRelay } from "@shardkit/prisma";
import { openShards } from "../shards.js";
import { WalletService } from "../wallet-service.js";

process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
const shards = await openShards({ shardsJson: process.env.SHARDKIT_SHARDS, log: () => {} });
const service = new WalletService(shards, { deadlineMs: 1500 });
const hangEvery = Number(process.env.HANG_EVERY ?? 4);
let deliveries = 0;
const relay = createOutboxRelay({
  registry: shards.registry,
  batchSize: 5,
  leaseMs: 2000,
  deliveryTimeoutMs: 1000,
  maxAttempts: 2,
  backoff: { baseMs: 50, maxMs: 300 },
  pollIntervalMs: 50,
  deliver: async (message) => {
    if (++deliveries % hangEvery === 0) {
      process.stdout.write(`hung ${message.id}\n`);
      await new Promise(() => {});
    }
    await service.handle(message);
    await service.handle(message);
    process.stdout.write(`delivered ${message.id}\n`);
  },
  onError: () => {},
});
relay.start();
process.stdout.write("started\n");
