// A relay process for the "killed mid-batch" test: delivers events by appending their IDs to a
// file, and after DELIVER_THEN_HANG deliveries stops answering (the parent then SIGKILLs it).
import { appendFileSync } from "node:fs";
import { PrismaPg } from "@prisma/adapter-pg";
import { createShardRegistry } from "../src/registry.js";
import { createOutboxRelay } from "../src/relay/relay.js";
import { PrismaClient } from "./generated/prisma/client.js";

const { urls, shards, out, hangAfter, leaseMs } = JSON.parse(process.env.RELAY_CHILD!) as {
  urls: string[];
  shards: string[][];
  out: string;
  hangAfter: number;
  leaseMs: number;
};
const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
const registry = createShardRegistry({
  shards: shards.flatMap((keys, i) => keys.map((shard) => ({ shard, client: clients[i]! }))),
});
// Connect first: a cold client's first claim can take longer than the lease leaves for a delivery
// on a loaded machine, and the relay then (rightly) releases the claim unsent.
await Promise.all(clients.map((client) => client.$queryRawUnsafe("SELECT 1")));
let delivered = 0;
const relay = createOutboxRelay({
  registry,
  leaseMs,
  deliveryTimeoutMs: 1000,
  deliveryConcurrency: 1, // one delivery at a time: the test kills it after exactly `hangAfter`
  deliver: async (message) => {
    appendFileSync(out, `${message.id}\n`);
    if (++delivered === hangAfter) {
      process.stdout.write("hanging\n");
      await new Promise(() => {});
    }
  },
});
await relay.runOnce();
