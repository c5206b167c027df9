// What a test's child process (consumer-child.ts, relay-child.ts) starts with: its options, a NATS
// connection, and a registry over its shards' databases.
import { connect } from "@nats-io/transport-node";
import { PrismaPg } from "@prisma/adapter-pg";
import { createShardRegistry } from "@shardkit/prisma";
import { PrismaClient } from "../examples/generated/prisma/client.js";

/** The options the parent passed in the environment variable `variable` (JSON), and what they name. */
export async function startChild<Options>(variable: string) {
  const options = JSON.parse(process.env[variable]!) as Options & {
    urls: string[];
    shards: string[];
    natsUrl: string;
  };
  const nc = await connect({ servers: options.natsUrl });
  const clients = options.urls.map(
    (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }),
  );
  const registry = createShardRegistry({
    shards: options.shards.map((shard, i) => ({ shard, client: clients[i]! })),
  });
  return { options, nc, clients, registry };
}
