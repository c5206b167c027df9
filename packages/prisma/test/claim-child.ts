// A process that creates one customer with an email unique across shards, for the claims crash
// tests: the parent holds locks that stop it at a step of the saga, then SIGKILLs it there.
import { PrismaPg } from "@prisma/adapter-pg";
import { shardRouting } from "../src/extension.js";
import { createShardRegistry } from "../src/registry.js";
import { PrismaClient } from "./generated/prisma/client.js";

const { urls, shards, email, shard } = JSON.parse(process.env.CLAIM_CHILD!) as {
  urls: string[];
  shards: string[][];
  email: string;
  shard: string;
};
const clients = urls.map((url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }));
const registry = createShardRegistry({
  shards: shards.flatMap((keys, i) => keys.map((key) => ({ shard: key, client: clients[i]! }))),
});
const db = clients[0]!.$extends(
  shardRouting({ registry, models: { Customer: { unique: { email: true }, place: () => shard } } }),
);
process.stdout.write("started\n");
await db.customer.create({
  data: { name: "child", region: "eu", email } as { id: string; name: string; region: string; email: string },
});
process.stdout.write("done\n");
await registry.disconnect();
