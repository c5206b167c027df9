import { EMBEDDED_SHARDS } from "@shardkit/service-kit/customers";
import { serviceShards } from "@shardkit/service-kit/shards";
import { PrismaClient } from "./generated/prisma/client.js";

/** Key fields: every model is colocated with its customer, so each row routes by its own ID or its parent's. */
export const routingModels = {
  Wallet: { keys: ["id", "customerId"] },
  Entry: { keys: ["id", "walletId"] },
  Transfer: { keys: ["id", "fromWalletId"] },
};

/**
 * Opens the shards (`serviceShards`): embedded PGlite databases by default, under `dataDir`, or the
 * PostgreSQL ones of `shardsJson` (SHARDKIT_SHARDS), each with the schema; with the registry, the
 * routed client `db`, each database's state, `health()`, `describe` and `close()`.
 */
export const openShards = serviceShards({
  schema: new URL("../prisma/schema", import.meta.url).pathname,
  createClient: (adapter) => new PrismaClient({ adapter }),
  embeddedShards: EMBEDDED_SHARDS,
  models: routingModels,
  extend: (client: PrismaClient, routing) => client.$extends(routing),
});
export type Shards = Awaited<ReturnType<typeof openShards>>;
/** A transaction on one shard, as the routed client gives it (`$transactionOn`, `$command`). */
export type Tx = Parameters<Parameters<Shards["db"]["$transactionOn"]>[1]>[0];
