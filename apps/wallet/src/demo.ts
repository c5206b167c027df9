// The demo (`demo` script): starts the wallet service on embedded PGlite shards (or the
// PostgreSQL shards in SHARDKIT_SHARDS), drives a scenario over real HTTP and shows where every
// row lives and the final balances.
import { randomBytes, randomUUID } from "node:crypto";
import { ShardedUUID } from "@shardkit/id";
import { createOutboxRelay } from "@shardkit/prisma";
import { openDemoShards, say } from "@shardkit/service-kit/demo";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { openShards } from "./shards.js";
import { WalletService } from "./wallet-service.js";

const shards = await openDemoShards(openShards);
const service = new WalletService(shards);
const relay = createOutboxRelay({
  registry: shards.registry,
  pollIntervalMs: 50,
  deliver: (m) => service.handle(m),
});
// Credentials: an operator's token creates customers; each customer acts with its own token. (A
// real deployment issues them where it authenticates people, signed with WALLET_AUTH_SECRET.)
const auth = createAuth(process.env.WALLET_AUTH_SECRET ?? randomBytes(32).toString("base64url"));
const operator = await auth.issue({ role: "admin", subject: "demo" });
const app = buildApp(service, { auth });
const base = await app.listen({ port: 0, host: "127.0.0.1" });
relay.start();
say(`wallet service on ${base}, ${shards.describe}\n`);

async function call(method: string, path: string, body?: unknown, token: string | null = operator) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      "content-type": "application/json",
      "idempotency-key": randomUUID(),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, string> };
}
const shardOf = (id: string) => ShardedUUID.shardOf(id).key;
const names = new Map<string, string>();

const people = [
  { name: "Ana", region: "DE", tenant: "acme" },
  { name: "Bruno", region: "ES", tenant: "globex" },
  { name: "Carla", region: "MX", tenant: "acme" },
  { name: "Diego", region: "MX", tenant: "initech" },
];
const wallets: Record<string, string> = {};
const tokens: Record<string, string> = {};
say("customers (the region picks the group, the tenant's hash picks the shard):");
for (const person of people) {
  const customer = (await call("POST", "/customers", person)).body;
  const token = await auth.issue({ role: "customer", customerId: customer.id! });
  tokens[person.name] = token;
  const currency = person.region === "MX" ? "MXN" : "EUR";
  const wallet = (await call("POST", `/customers/${customer.id}/wallets`, { currency }, token)).body;
  wallets[person.name] = wallet.id!;
  names.set(wallet.id!, `${person.name} ${currency}`);
  say(
    `  ${person.name.padEnd(6)} ${person.region}/${person.tenant.padEnd(8)} -> shard ${shardOf(customer.id!)}  wallet ${wallet.id} (${currency})`,
  );
  await call("POST", `/wallets/${wallet.id}/deposits`, { amount: "10000" }, token);
}
/** Another wallet in `currency` for `person`'s customer (the owner of their first wallet), shown as `label`. */
async function openAnotherWallet(person: string, currency: string, label: string) {
  const { customerId } = (await service.getWallet(wallets[person]!)).wallet;
  const wallet = (await call("POST", `/customers/${customerId}/wallets`, { currency }, tokens[person])).body;
  names.set(wallet.id!, label);
  return wallet;
}
const anaSavings = await openAnotherWallet("Ana", "EUR", "Ana savings EUR");
const carlaEur = await openAnotherWallet("Carla", "EUR", "Carla EUR");
say(
  `  Ana also opens a savings wallet (shard ${shardOf(anaSavings.id!)}), Carla a EUR wallet (shard ${shardOf(carlaEur.id!)})`,
);
say("  everyone deposits 100.00\n");

say("transfers:");
const transfers = [
  {
    label: "Ana -> Ana savings, 25.00 (same shard: one transaction)",
    who: "Ana",
    from: wallets.Ana!,
    to: anaSavings.id!,
    amount: "2500",
  },
  {
    label: "Ana -> Carla EUR, 30.00 (EU -> MX shard: saga over the outbox)",
    who: "Ana",
    from: wallets.Ana!,
    to: carlaEur.id!,
    amount: "3000",
  },
  {
    label: "Bruno -> Diego MXN, 10.00 (wrong currency: refused, refunded)",
    who: "Bruno",
    from: wallets.Bruno!,
    to: wallets.Diego!,
    amount: "1000",
  },
];
const pending: { label: string; id: string }[] = [];
for (const t of transfers) {
  const { status, body } = await call(
    "POST",
    "/transfers",
    { fromWalletId: t.from, toWalletId: t.to, amount: t.amount },
    tokens[t.who],
  );
  say(`  ${t.label}: HTTP ${status} ${body.status}`);
  pending.push({ label: t.label, id: body.id! });
}
const overdraw = await call(
  "POST",
  `/wallets/${wallets.Diego}/withdrawals`,
  { amount: "999999" },
  tokens.Diego,
);
say(`  Diego withdraws 9,999.99: HTTP ${overdraw.status} ${overdraw.body.error}`);
const bad = await call(
  "POST",
  "/transfers",
  { fromWalletId: wallets.Ana, toWalletId: "0f8fad5b-d9cb-469f-a165-70867728950e", amount: "1" },
  tokens.Ana,
);
say(`  Ana -> a v4 UUID: HTTP ${bad.status} ${bad.body.error}: ${bad.body.message}`);

const stranger = await call("POST", `/wallets/${wallets.Ana}/withdrawals`, { amount: "100" }, tokens.Bruno);
say(`  Bruno withdraws from Ana's wallet: HTTP ${stranger.status} ${stranger.body.error}`);
const anonymous = await call("GET", `/wallets/${wallets.Ana}`, undefined, null);
say(`  no credential: HTTP ${anonymous.status} ${anonymous.body.error}`);

for (let i = 0; i < 200; i++) {
  const states = await Promise.all(pending.map((p) => service.getTransfer(p.id)));
  if (states.every((s) => s.status !== "pending")) break;
  await new Promise((r) => setTimeout(r, 50));
}
say("\nafter the relay ran the sagas:");
for (const p of pending) {
  const t = await service.getTransfer(p.id);
  say(
    `  ${p.label.split(",")[0]}: ${t.status}${t.reason ? ` (${t.reason.replace(/wallet \S+/, "destination")})` : ""}`,
  );
}

say("\nwhere every row lives:");
const totals = new Map<string, bigint>();
for (const { shard, customers, wallets: ws } of await service.census()) {
  say(`  shard ${shard}: ${customers.map((c) => c.name).join(", ") || "(no customers)"}`);
  for (const w of ws) {
    totals.set(w.currency, (totals.get(w.currency) ?? 0n) + w.balance);
    say(
      `    ${(names.get(w.id) ?? w.id).padEnd(16)} ${(Number(w.balance) / 100).toFixed(2).padStart(8)} ${w.currency}`,
    );
  }
}
const deposited = new Map<string, bigint>();
for (const person of people) {
  const currency = person.region === "MX" ? "MXN" : "EUR";
  deposited.set(currency, (deposited.get(currency) ?? 0n) + 10000n);
}
for (const [currency, total] of totals) {
  const ok = total === deposited.get(currency) ? "conserved" : "MISMATCH";
  say(
    `total ${currency}: ${(Number(total) / 100).toFixed(2)} = deposits ${(Number(deposited.get(currency)) / 100).toFixed(2)} - withdrawals 0.00: ${ok}`,
  );
}

await relay.stop();
await app.close();
await shards.close();
