import { createShardSelector } from "@shardkit/selector";
const rows = Array.from({ length: 1000 }, (_, i) => ({ tenantId: `tenant-${i}-${(i * 2654435761) % 100000}`, region: ["MX","US","DE","BR"][i%4], regulatoryClass: i % 3 === 0 ? "bank" : "fintech" }));
const range = (n) => Array.from({ length: n }, (_, i) => i);
const mk = (members) => createShardSelector({ routingKey: "tenantId", groups: [0,1,2].map(group => ({ group, members })), rules: [{ when: { region: "MX", regulatoryClass: "bank" }, group: 1 }, { when: { region: { oneOf: ["DE","FR"] } }, group: 2 }], defaultGroup: 0 });
for (const [name, s] of [["8", mk(range(8))], ["64", mk(range(64))], ["64w", mk(range(64).map(m => ({ member: m, weight: 1 + m % 3 })))]]) {
  let sink = 0;
  for (let r = 0; r < 3; r++) {
    const t = process.hrtime.bigint();
    for (let k = 0; k < 2000; k++) for (let i = 0; i < 1000; i++) sink += s.select(rows[i]).bits;
    console.log(name, Number(process.hrtime.bigint() - t) / 2e6, "ns/call", sink % 2);
  }
}
