import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";

// A customer in group 1 ("eu-onshore", say), member 5: the ID carries both.
const shard = ShardIdentifier.of(1, 5);
const customerId = ShardedId.generate("Customer", shard);

// Its wallet is generated on the customer's shard: one local transaction can touch both.
const walletId = ShardedId.colocatedWith("Wallet", customerId);

for (const id of [customerId, walletId, ShardedUUID.generate()]) {
  const owner = ShardedUUID.shardOf(id);
  const at = new Date(ShardedUUID.timestampOf(id)).toISOString();
  console.log(`${id}  shard ${owner.key} (group ${owner.group}, member ${owner.member})  created ${at}`);
}

// Anything that is not a canonical version-7 UUID is refused, never routed to a default shard.
try {
  ShardedUUID.shardOf("0f8fad5b-d9cb-469f-a165-70867728950e"); // a v4 UUID
} catch (err) {
  console.log(`${err.name} (${err.code}): ${err.message}`);
}
