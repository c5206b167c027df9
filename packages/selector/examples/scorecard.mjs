import { analyzeShardKey } from "@shardkit/selector";

// A sampled hour of a payments service: 320 tenants with 50 accounts each, plus one "whale"
// tenant that alone sends a fifth of the operations. A quarter of the operations are transfers
// between two accounts of the same tenant; 1% are admin reports that carry no tenant at all.
const ops = [];
for (let i = 0; i < 20_000; i++) {
  const tenantId = i % 5 === 0 ? "whale" : `tenant-${i % 400}`;
  const account = Math.floor(i / 400); // 0..49
  const transfer = i % 4 === 0;
  ops.push({
    tenantId: i % 101 === 100 ? null : tenantId,
    accountId: `${tenantId}/acct-${account}`,
    counterparty: transfer ? `${tenantId}/acct-${(account + 1 + (i % 7)) % 50}` : undefined,
    op: transfer || i % 3 === 0 ? "write" : "read",
    bytes: transfer ? 900 : 300,
  });
}

const candidates = {
  tenantId: (o) => ({ key: o.tenantId }),
  accountId: (o) => ({ key: o.tenantId && o.accountId, touches: o.counterparty && [o.counterparty] }),
  "tenantId, whale split by account": (o) =>
    o.tenantId === "whale"
      ? { key: o.accountId, touches: o.counterparty && [o.counterparty] }
      : { key: o.tenantId },
};

console.log("key                               distinct  top-1  imbalance (traffic / rows)  lost locality");
for (const [name, keyOf] of Object.entries(candidates)) {
  const card = analyzeShardKey(
    ops.map((o) => ({ ...keyOf(o), op: o.op, cost: o.bytes })),
    { members: 8 },
  );
  const pct = (x) => `${(x * 100).toFixed(1)}%`;
  console.log(
    `${name.padEnd(34)}${String(card.cardinality).padStart(8)}  ${pct(card.top[0].share).padStart(5)}` +
      `  ${card.load.imbalance.toFixed(2).padStart(9)} / ${card.load.keyImbalance.toFixed(2)}` +
      `${pct(card.locality.lostShare).padStart(21)}`,
  );
}
