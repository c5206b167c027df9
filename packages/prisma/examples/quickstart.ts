import { PGlite } from "@electric-sql/pglite";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { type CrossShardError, createShardRegistry, shardRouting } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/prisma/client.js";

// Two embedded databases holding four logical shards: group 0 (EU) and group 1 (MX).
const databases = [new PGlite(), new PGlite()];
await rolloutSchema({
  schema: new URL("./schema.prisma", import.meta.url).pathname,
  targets: databases.map((pglite, i) => ({ name: `db-${i}`, adapter: new PrismaPGlite(pglite) })),
});
const [eu, mx] = databases.map((pglite) => new PrismaClient({ adapter: new PrismaPGlite(pglite) }));
const registry = createShardRegistry({
  shards: [
    { shard: ShardIdentifier.of(0, 0), client: eu! },
    { shard: ShardIdentifier.of(0, 1), client: eu! },
    { shard: ShardIdentifier.of(1, 0), client: mx! },
    { shard: ShardIdentifier.of(1, 1), client: mx! },
  ],
});
const db = eu!.$extends(shardRouting({ registry, models: { Wallet: { keys: ["id", "customerId"] } } }));

// Application code never names a database: the IDs do.
const ana = ShardedId.generate("Customer", ShardIdentifier.of(0, 1));
const luis = ShardedId.generate("Customer", ShardIdentifier.of(1, 0));
for (const [id, name, region] of [
  [ana, "Ana", "eu"],
  [luis, "Luis", "mx"],
] as const) {
  await db.customer.create({
    data: {
      id,
      name,
      region,
      wallets: { create: { id: ShardedId.colocatedWith("Wallet", id), balance: 100n } },
    },
  });
}
for (const [label, client] of [
  ["eu database", eu!],
  ["mx database", mx!],
] as const) {
  const names = (await client.customer.findMany({ include: { wallets: true } })).map(
    (c) => `${c.name} (${c.wallets.length} wallet)`,
  );
  console.log(`${label}: ${names.join(", ")}`);
}

// One customer's work is one shard transaction.
const [anaWallet] = await db.wallet.findMany({ where: { customerId: ana } });
await db.$transactionOn(ana, async (tx) => {
  await tx.wallet.update({ where: { id: anaWallet!.id }, data: { balance: { decrement: 30n } } });
});
console.log("Ana's balance:", (await db.wallet.findUnique({ where: { id: anaWallet!.id } }))?.balance);

// Work that spans shards is refused unless the caller opts in, and is then never called atomic.
try {
  await db.$action((unit) => {
    unit.update("customer", { where: { id: ana }, data: { name: "Ana M." } });
    unit.update("customer", { where: { id: luis }, data: { name: "Luis R." } });
  });
} catch (err) {
  console.log(`${(err as CrossShardError).code}: ${(err as Error).message.split(";")[0]}`);
}

await registry.disconnect();
for (const pglite of databases) await pglite.close();
