// Writes a sampled hour of a payments service as JSON lines (one operation per line) to stdout:
// 320 tenants with 50 accounts each, plus one "whale" tenant that alone sends a fifth of the
// operations. A quarter of the operations are transfers between two accounts of one tenant (the
// `accounts` field lists both); 1% are admin reports that carry no tenant. Each account has a
// home region, and some of the whale's accounts changed region during the hour.
//   node examples/traffic.mjs > traffic.jsonl
const regions = ["us-east", "us-west", "eu-west", "ap-south"];
for (let i = 0; i < 20_000; i++) {
  const tenant = i % 5 === 0 ? "whale" : `tenant-${i % 400}`;
  const account = Math.floor(i / 400); // 0..49
  const transfer = i % 4 === 0;
  const relocated = tenant === "whale" && account % 5 === 0 && i % 400 >= 200;
  const op = {
    tenant: i % 101 === 100 ? null : tenant,
    accounts: transfer
      ? [`${tenant}/acct-${account}`, `${tenant}/acct-${(account + 1 + (i % 7)) % 50}`]
      : [`${tenant}/acct-${account}`],
    region: relocated ? "eu-west" : regions[account % 4],
    op: transfer || i % 3 === 0 ? "write" : "read",
    cost: transfer ? 900 : 300,
  };
  process.stdout.write(`${JSON.stringify(op)}\n`);
}
