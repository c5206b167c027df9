import { ShardedId, ShardIdentifier } from "@shardkit/id";

// The test layout, without any database: six logical shards in two groups, and the routing config.
// test/world.ts puts them on three databases: a holds 0/0 and 0/1, b 0/2 and 1/0, c 1/1 and 1/2.

export const S = {
  g0m0: ShardIdentifier.of(0, 0),
  g0m1: ShardIdentifier.of(0, 1),
  g0m2: ShardIdentifier.of(0, 2),
  g1m0: ShardIdentifier.of(1, 0),
  g1m1: ShardIdentifier.of(1, 1),
  g1m2: ShardIdentifier.of(1, 2),
};

/**
 * The six shards on three databases as test/world.ts places them (a registry's `shards`): `a` holds
 * 0/0 and 0/1, `b` 0/2 and 1/0, `c` 1/1 and 1/2.
 */
export const worldPlacement = <Client>(a: Client, b: Client, c: Client) => [
  { shard: S.g0m0, client: a },
  { shard: S.g0m1, client: a },
  { shard: S.g0m2, client: b },
  { shard: S.g1m0, client: b },
  { shard: S.g1m1, client: c },
  { shard: S.g1m2, client: c },
];

/** A new customer's row on `shard` (region eu in group 0, mx in group 1). */
export const newCustomer = (shard: ShardIdentifier, name = "c") => ({
  id: ShardedId.generate("Customer", shard),
  name,
  region: shard.group === 0 ? "eu" : "mx",
});

/** A wallet of the customer `owner`, on its shard (`{ data }` of a create). */
export const walletOf = (owner: string) => ({
  data: { id: ShardedId.colocatedWith("Wallet", owner), customerId: owner },
});

export const models = {
  Wallet: { keys: ["id", "customerId"] },
  Order: { keys: ["id", "customerId"] },
  OrderItem: { keys: ["id", "orderId"] },
};

/** The models of test/schema.prisma (its tables), sorted. */
export const SCHEMA_MODELS = [
  "AtomicDecision",
  "Customer",
  "IdempotencyKey",
  "Order",
  "OrderItem",
  "OutboxEvent",
  "ProcessedEvent",
  "Setting",
  "UniqueClaim",
  "UniqueClaimToken",
  "Wallet",
];
