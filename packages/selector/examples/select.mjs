import { ShardedId, ShardedUUID } from "@shardkit/id";
import { createShardSelector } from "@shardkit/selector";

const selector = createShardSelector({
  routingKey: "tenantId",
  groups: [
    { group: 0, name: "us", members: [0, 1, 2, 3] },
    {
      group: 1,
      name: "mx-onshore",
      members: [0, 1, { member: 2, draining: true }, { member: 3, weight: 2 }],
    },
  ],
  rules: [
    { name: "mx-bank", when: { region: "MX", regulatoryClass: "bank" }, group: 1 },
    { name: "us", when: { region: { oneOf: ["US", "PR"] } }, group: 0 },
  ],
  // No defaultGroup: a row that no rule places is refused, never guessed.
});

// Creating a customer: the selector picks the shard once, the ID carries it for life.
const customer = { tenantId: "tenant-42", region: "MX", regulatoryClass: "bank" };
const customerId = ShardedId.generate("Customer", selector.select(customer));
console.log(`${customerId} is on shard ${ShardedUUID.shardOf(customerId).key}`);
console.log(selector.explain(customer).reason);
console.log(selector.explain({ tenantId: "tenant-7", region: "PR" }).reason);

for (const row of [{ tenantId: "tenant-9", region: "DE" }, { region: "US" }]) {
  try {
    selector.select(row);
  } catch (err) {
    console.log(`${err.code}: ${err.message}`);
  }
}

try {
  createShardSelector({
    routingKey: "tenantId",
    groups: [{ group: 1, members: [0, { member: 3, weight: 0 }] }],
  });
} catch (err) {
  console.log(`${err.code}: ${err.issues.join("; ")}`);
}
