import { spawn } from "node:child_process";
import { ShardedUUID } from "@shardkit/id";
import { createOutboxRelay } from "@shardkit/prisma";
import { withClusterStopped } from "@shardkit/test-db";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Entry, Transfer, Wallet } from "./generated/prisma/client.js";
import { createPlacement, REGIONS } from "./placement.js";
import { SECOND } from "./test/global-setup.js";
import { walletWorld } from "./test/world.js";

let world: Awaited<ReturnType<typeof walletWorld>>;
beforeAll(async () => {
  world = await walletWorld();
});
afterAll(() => world.close());

type Op =
  | { kind: "deposit"; wallet: number; amount: number }
  | { kind: "withdraw"; wallet: number; amount: number }
  | { kind: "transfer"; from: number; to: number; amount: number };

const opArb = (wallets: number) =>
  fc.oneof(
    fc.record({
      kind: fc.constant("deposit" as const),
      wallet: fc.nat(wallets - 1),
      amount: fc.integer({ min: 1, max: 5000 }),
    }),
    fc.record({
      kind: fc.constant("withdraw" as const),
      wallet: fc.nat(wallets - 1),
      amount: fc.integer({ min: 1, max: 3000 }),
    }),
    fc.record({
      kind: fc.constant("transfer" as const),
      from: fc.nat(wallets - 1),
      to: fc.nat(wallets - 1),
      amount: fc.integer({ min: 1, max: 3000 }),
    }),
    fc.record({
      kind: fc.constant("transfer" as const),
      from: fc.nat(wallets - 1),
      to: fc.nat(wallets - 1),
      amount: fc.integer({ min: 1, max: 3000 }),
    }),
  );

/** Starts a relay in another process; resolves once it has delivered a few events and hangs mid-batch. */
function relayProcess() {
  const child = spawn("pnpm", ["exec", "tsx", "src/test/relay-child.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, SHARDKIT_SHARDS: inject("shardsJson"), HANG_AFTER: "3" },
    stdio: ["ignore", "pipe", "inherit"],
    detached: true,
  });
  const hanging = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("hanging") && resolve());
    child.on("exit", (code) => reject(new Error(`relay process exited (${code}) before hanging`)));
  });
  return {
    hanging,
    async kill() {
      const exited = new Promise((resolve) => child.on("exit", resolve));
      process.kill(-child.pid!, "SIGKILL");
      await exited;
    },
  };
}

describe("conservation: money is never lost or created", () => {
  it("random concurrent deposits, withdrawals and transfers, with a relay killed mid-batch, a shard server stopped and duplicate deliveries", async () => {
    // Two customers on each of the four shards (one shard lives on the second server), mostly EUR
    // wallets; the two MXN wallets make cross-currency transfers that get refused and refunded.
    const placement = createPlacement(world.shards.registry.shards);
    const wallets: { id: string; shard: string }[] = [];
    const perShard = new Map<string, number>();
    for (let t = 0; wallets.length < 8 && t < 500; t++) {
      const region = t % 2 === 0 ? REGIONS.mx[0]! : REGIONS.eu[t % REGIONS.eu.length]!;
      const tenant = `tenant-${t}`;
      const shard = placement.select({ region, tenant }).key;
      if ((perShard.get(shard) ?? 0) >= 2) continue;
      perShard.set(shard, (perShard.get(shard) ?? 0) + 1);
      const currency = wallets.length === 3 || wallets.length === 6 ? "MXN" : "EUR";
      const { walletId } = await world.customerWithWallet(region, tenant, currency);
      wallets.push({ id: walletId, shard: ShardedUUID.shardOf(walletId).key });
    }
    expect([...perShard.values()]).toEqual([2, 2, 2, 2]);

    let deposited = 0n;
    let withdrawn = 0n;
    const transferIds: string[] = [];
    const outcomes = { ok: 0, refused: 0, failed: 0 };
    async function run(op: Op) {
      try {
        if (op.kind === "deposit") {
          await world.service.deposit(wallets[op.wallet]!.id, BigInt(op.amount), crypto.randomUUID());
          deposited += BigInt(op.amount);
        } else if (op.kind === "withdraw") {
          await world.service.withdraw(wallets[op.wallet]!.id, BigInt(op.amount), crypto.randomUUID());
          withdrawn += BigInt(op.amount);
        } else {
          const { result } = await world.service.transfer(
            wallets[op.from]!.id,
            wallets[op.to]!.id,
            BigInt(op.amount),
            crypto.randomUUID(),
          );
          transferIds.push(result.id);
        }
        outcomes.ok++;
      } catch (error) {
        // A refusal (insufficient funds, same-shard currency mismatch, ...) or the stopped server
        // (503 SHARD_UNAVAILABLE, never a 500): either way the call wrote nothing, and it is not counted.
        const status = (error as { status?: number }).status;
        if (status === 503) outcomes.failed++;
        else if (status !== undefined && status < 500) outcomes.refused++;
        else throw error;
      }
    }
    const ops = fc.sample(fc.array(opArb(wallets.length), { minLength: 150, maxLength: 150 }), {
      seed: 20261130,
      numRuns: 1,
    })[0]!;
    const batches = Array.from({ length: Math.ceil(ops.length / 10) }, (_, i) =>
      ops.slice(i * 10, i * 10 + 10),
    );
    const runBatches = async (list: Op[][]) => {
      for (const batch of list) await Promise.all(batch.map(run));
    };

    // Phase 1: a relay in another process delivers a few events, then hangs mid-batch and is killed.
    for (const w of wallets) await run({ kind: "deposit", wallet: wallets.indexOf(w), amount: 10_000 });
    await runBatches(batches.slice(0, 5));
    const child = relayProcess();
    await child.hanging;
    await child.kill();

    // Phase 2: the second server (shard 1/1) is down while work goes on; a relay that delivers
    // every event twice keeps running (deliveries to the stopped shard fail and back off).
    const seen = new Map<string, number>();
    const relay = createOutboxRelay({
      registry: world.shards.registry,
      backoff: { baseMs: 50, maxMs: 500 },
      pollIntervalMs: 20,
      deliver: async (message) => {
        seen.set(message.id, (seen.get(message.id) ?? 0) + 1);
        await world.service.handle(message);
        await world.service.handle(message); // a duplicate delivery
      },
      onError: () => {},
    });
    relay.start();
    await withClusterStopped(SECOND.cluster, SECOND.port, () => runBatches(batches.slice(5, 10)));

    // Phase 3: the server is back; the rest of the work, then the relay drains everything.
    await runBatches(batches.slice(10));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const lag = await relay.lag().catch(() => null);
      const transfers = await world.all<Transfer>("transfer");
      if (lag?.every((l) => l.pending === 0) && transfers.every((t) => t.status !== "pending")) break;
      if (Date.now() > deadline) throw new Error(`not drained: ${JSON.stringify(lag)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await relay.stop();

    // The invariants.
    const allWallets = await world.all<Wallet>("wallet");
    const entries = await world.all<Entry>("entry");
    const transfers = await world.all<Transfer>("transfer");
    const total = allWallets.reduce((sum, w) => sum + w.balance, 0n);
    expect(total).toBe(deposited - withdrawn);
    for (const wallet of allWallets) {
      const ledger = entries.filter((e) => e.walletId === wallet.id).reduce((sum, e) => sum + e.amount, 0n);
      expect(ledger, `ledger of ${wallet.id}`).toBe(wallet.balance);
      expect(wallet.balance >= 0n).toBe(true);
    }
    expect(transfers.map((t) => t.id).sort()).toEqual([...transferIds].sort());
    for (const t of transfers) {
      expect(["completed", "refunded"]).toContain(t.status);
      const of = (kind: string) => entries.filter((e) => e.transferId === t.id && e.kind === kind).length;
      expect(of("transfer_out"), t.id).toBe(1);
      expect(of("transfer_in"), t.id).toBe(t.status === "completed" ? 1 : 0);
      expect(of("refund"), t.id).toBe(t.status === "refunded" ? 1 : 0);
    }
    const crossShard = transfers.filter(
      (t) => ShardedUUID.shardOf(t.fromWalletId) !== ShardedUUID.shardOf(t.toWalletId),
    );
    expect(crossShard.length).toBeGreaterThan(10);
    expect(transfers.some((t) => t.status === "refunded")).toBe(true);
    expect(outcomes.failed).toBeGreaterThan(0); // the stopped server really refused work, as 503s
    expect([...seen.values()].some((n) => n > 1)).toBe(true); // some deliveries were retried too
  }, 300_000);
});
