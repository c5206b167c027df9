import { readFileSync } from "node:fs";
import {
  createDatabase,
  dropDatabase,
  httpClient,
  patient,
  shareCluster,
  testCluster,
  whyNoClusters,
} from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "./app.js";
import { openShards, type Shards } from "./shards.js";
import { auth, operator } from "./test/auth.js";
import { WalletService } from "./wallet-service.js";

// POST /transfers/atomic on real PostgreSQL: four shards on two databases of a server with
// max_prepared_transactions > 0 (this project's own, named after it, shared when runs overlap), EU
// shards on one database and MX shards on the other, so a transfer from an EU customer to an MX one
// is a two-phase commit across databases. Skipped, saying why, where the tests may not make servers.
const project = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).name;
const SERVER = testCluster(`${project} atomic`, {});
const noClusters = whyNoClusters();
if (noClusters)
  console.log(
    `skipping the atomic transfers: cannot make PostgreSQL server ${SERVER.cluster}: ${noClusters}`,
  );
const names = [`sk_wallet_atomic_eu_${process.pid}`, `sk_wallet_atomic_mx_${process.pid}`];
const urls: string[] = [];
let release: (() => Promise<void>) | undefined;
let shards: Shards | undefined;
let http: ReturnType<typeof httpClient>;
let app: ReturnType<typeof buildApp> | undefined;

beforeAll(async () => {
  if (noClusters) return;
  release = await shareCluster(SERVER.cluster, SERVER.port, { settings: { max_prepared_transactions: 50 } });
  for (const name of names) urls.push(await createDatabase(SERVER.port, name));
  const shardsJson = JSON.stringify([
    { group: 0, member: 0, url: urls[0] },
    { group: 0, member: 1, url: urls[0] },
    { group: 1, member: 0, url: urls[1] },
    { group: 1, member: 1, url: urls[1] },
  ]);
  shards = await openShards({ shardsJson, log: () => {} });
  await shards.ready;
  app = buildApp(new WalletService(shards, { deadlineMs: patient(20_000) }), { auth });
  http = httpClient(app, { token: operator });
}, patient(180_000));

afterAll(async () => {
  await app?.close();
  await shards?.close();
  for (const name of names) await dropDatabase(SERVER.port, name).catch(() => {});
  await release?.();
}, patient(120_000));

async function walletOf(region: string, tenant: string, currency: string, deposit: string) {
  const customer = (await http("POST", "/customers", { name: `${region}-${tenant}`, region, tenant })).body;
  const wallet = (await http("POST", `/customers/${customer.id}/wallets`, { currency })).body;
  expect((await http("POST", `/wallets/${wallet.id}/deposits`, { amount: deposit })).status).toBe(200);
  return wallet.id as string;
}

const balanceOf = async (walletId: string) =>
  BigInt((await http("GET", `/wallets/${walletId}`)).body.wallet.balance);

/** Every database's rows, read on its own client: the money, the ledger, and what is still prepared. */
async function books() {
  let total = 0n;
  let ledger = 0n;
  const prepared: string[] = [];
  for (const { client } of shards!.registry.databases) {
    const [money] = await client.$queryRawUnsafe<{ s: string }[]>(
      `SELECT coalesce(sum(balance), 0)::text AS s FROM "Wallet"`,
    );
    const [entries] = await client.$queryRawUnsafe<{ s: string }[]>(
      `SELECT coalesce(sum(amount), 0)::text AS s FROM "Entry"`,
    );
    total += BigInt(money!.s);
    ledger += BigInt(entries!.s);
    const rows = await client.$queryRawUnsafe<{ gid: string }[]>(
      "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
    );
    prepared.push(...rows.map((r) => r.gid));
  }
  return { total, ledger, prepared };
}

describe.skipIf(noClusters)("POST /transfers/atomic: all or nothing across databases", () => {
  it("moves money between customers on two databases at once, once per Idempotency-Key; refusals change nothing", async () => {
    const ana = await walletOf("DE", "acme", "EUR", "1000");
    const carla = await walletOf("MX", "acme", "EUR", "1000");
    const pesos = await walletOf("MX", "initech", "MXN", "1000");
    const key = "atomic-transfer-1";
    const first = await http(
      "POST",
      "/transfers/atomic",
      { fromWalletId: ana, toWalletId: carla, amount: "300" },
      key,
    );
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body).toMatchObject({
      status: "completed",
      amount: "300",
      fromWalletId: ana,
      toWalletId: carla,
    });
    expect([await balanceOf(ana), await balanceOf(carla)]).toEqual([700n, 1300n]);
    // The same request again: the recorded transfer, nothing moved twice.
    const again = await http(
      "POST",
      "/transfers/atomic",
      { fromWalletId: ana, toWalletId: carla, amount: "300" },
      key,
    );
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect([await balanceOf(ana), await balanceOf(carla)]).toEqual([700n, 1300n]);
    // Refusals: neither side changes.
    const poor = await http("POST", "/transfers/atomic", {
      fromWalletId: ana,
      toWalletId: carla,
      amount: "5000",
    });
    expect(poor.status).toBe(409);
    expect(poor.body.error).toBe("INSUFFICIENT_FUNDS");
    const mismatch = await http("POST", "/transfers/atomic", {
      fromWalletId: ana,
      toWalletId: pesos,
      amount: "1",
    });
    expect(mismatch.status).toBe(422);
    expect([await balanceOf(ana), await balanceOf(carla), await balanceOf(pesos)]).toEqual([
      700n,
      1300n,
      1000n,
    ]);
    const carlaEntries = (await http("GET", `/wallets/${carla}`)).body.entries;
    expect(
      carlaEntries.map((e: { kind: string; transferId: string | null }) => [e.kind, e.transferId]),
    ).toEqual([
      ["deposit", null],
      ["transfer_in", first.body.id],
    ]);
    expect((await books()).prepared).toEqual([]);
  });

  it("concurrent transfers both ways between two databases conserve money: each one happened on both sides or on neither", async () => {
    const before = await books();
    const eu = await walletOf("ES", "globex", "EUR", "500");
    const mx = await walletOf("MX", "globex", "EUR", "500");
    const sends = Array.from({ length: 16 }, (_, i) => ({
      from: i % 2 === 0 ? eu : mx,
      to: i % 2 === 0 ? mx : eu,
      amount: BigInt(10 + i),
    }));
    const answers = await Promise.all(
      sends.map((s) =>
        http("POST", "/transfers/atomic", {
          fromWalletId: s.from,
          toWalletId: s.to,
          amount: String(s.amount),
        }),
      ),
    );
    // Each answer is a completed transfer, or a 503 that changed nothing (it kept losing the race for
    // the other wallet's lock across databases).
    for (const a of answers) expect([201, 503], JSON.stringify(a.body)).toContain(a.status);
    let expected = 500n;
    answers.forEach((a, i) => {
      if (a.status !== 201) return;
      const s = sends[i]!;
      expected += s.from === mx ? s.amount : -s.amount;
    });
    expect(answers.filter((a) => a.status === 201).length).toBeGreaterThan(0);
    expect(await balanceOf(eu)).toBe(expected);
    expect(await balanceOf(mx)).toBe(1000n - expected);
    const after = await books();
    expect(after.total - before.total).toBe(1000n);
    expect(after.ledger).toBe(after.total);
    expect(after.prepared).toEqual([]);
  });
});
