// A relay process for the conservation test: delivers events to the wallet service's saga and,
// after HANG_AFTER deliveries, stops answering (the test then SIGKILLs it mid-batch).
import { createOutboxRelay } from "@shardkit/prisma";
import { openShards } from "../shards.js";
import { WalletService } from "../wallet-service.js";

const shards = await openShards({ shardsJson: process.env.SHARDKIT_SHARDS, log: () => {} });
const service = new WalletService(shards);
const hangAfter = Number(process.env.HANG_AFTER ?? 3);
let delivered = 0;
const relay = createOutboxRelay({
  registry: shards.registry,
  batchSize: 50,
  leaseMs: 2000, // killed mid-batch: its undelivered events are claimed again 2 s later
  deliveryTimeoutMs: 1000,
  deliver: async (message) => {
    await service.handle(message);
    if (++delivered === hangAfter) {
      process.stdout.write("hanging\n");
      await new Promise(() => {});
    }
  },
});
process.stdout.write("started\n");
for (;;) await relay.runOnce();
