import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { ShardedUUID } from "@shardkit/id";
import { customersOnEveryShard } from "@shardkit/service-kit/customers";
import { patient, withClusterFrozen, withClusterStopped } from "@shardkit/test-db";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCustomerSelector } from "./customer-selector.js";
import type { Entry, Transfer, Wallet } from "./generated/prisma/client.js";
import { bearer, operator, TEST_SECRET } from "./test/auth.js";
import { walletWorld } from "./test/world.js";

const SECOND = inject("second"); // the run's own second server, which the tests stop

// The conservation soak: the real service in its own process, with every fault at once. It is
// killed with SIGKILL mid-run and started again; the second server is down for far longer than the
// relay's retry budget; then it is frozen (SIGSTOP); a second relay process delivers every event
// twice and leaves some deliveries hanging. Clients retry with their Idempotency-Key until they get
// an answer, as a real client does. After healing: every transfer completed or refunded, balances
// add up, no event dead.

const secondSkipped = inject("secondSkipped"); // why the tests that stop the second server cannot run, or ""
let world: Awaited<ReturnType<typeof walletWorld>>;
const children: Child[] = [];
beforeAll(async () => {
  world = await walletWorld();
});
afterAll(async () => {
  for (const c of children) c.kill();
  await world.close();
});

const APP_DIR = new URL("..", import.meta.url).pathname;

interface Child {
  process: ChildProcess;
  output: () => string;
  kill(): void;
  exited: Promise<unknown>;
}

/** Runs a script of this app in its own process group; resolves once its output matches `ready`. */
async function start(script: string, env: Record<string, string>, ready: RegExp): Promise<Child> {
  const proc = spawn(process.execPath, ["--import", "tsx", script], {
    cwd: APP_DIR,
    env: { ...process.env, SHARDKIT_SHARDS: inject("shardsJson"), ...env },
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  let text = "";
  const exited = new Promise((resolve) => proc.on("exit", resolve));
  const child: Child = {
    process: proc,
    output: () => text,
    kill() {
      try {
        process.kill(-proc.pid!, "SIGKILL");
      } catch {}
    },
    exited,
  };
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    const limit = patient(60_000);
    const timer = setTimeout(() => reject(new Error(`${script} not ready in ${limit} ms:\n${text}`)), limit);
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      if (ready.test(text)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before it was ready:\n${text}`));
    });
  });
  return child;
}

/** The service, on a port of its own, with a short deadline and a relay retry budget of a few hundred ms. */
async function service() {
  const child = await start(
    "src/server.ts",
    {
      PORT: "0",
      WALLET_AUTH_SECRET: TEST_SECRET,
      WALLET_DEADLINE_MS: "1500",
      RELAY_POLL_INTERVAL_MS: "50",
      RELAY_MAX_ATTEMPTS: "2",
      RELAY_BACKOFF_BASE_MS: "50",
      RELAY_BACKOFF_MAX_MS: "300",
      RELAY_DELIVERY_TIMEOUT_MS: "2000",
      RELAY_LEASE_MS: "4000",
    },
    /wallet service on http:\/\/127\.0\.0\.1:\d+/,
  );
  const base = /wallet service on (http:\/\/127\.0\.0\.1:\d+)/.exec(child.output())![1]!;
  return { child, base };
}

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
    { weight: 2, arbitrary: transferArb(wallets) },
  );
const transferArb = (wallets: number) =>
  fc.record({
    kind: fc.constant("transfer" as const),
    from: fc.nat(wallets - 1),
    to: fc.nat(wallets - 1),
    amount: fc.integer({ min: 1, max: 3000 }),
  });

describe("conservation: money is never lost or created", () => {
  it(
    "random deposits, withdrawals and transfers while the service is SIGKILLed and restarted, a server is down past the retry budget and then frozen, and a second relay duplicates and hangs deliveries",
    async ({ skip }) => {
      skip(secondSkipped !== "", secondSkipped);
      let { child: svc, base } = await service();
      const relay = await start("src/test/relay-child.ts", { HANG_EVERY: "4" }, /started/);

      /** One HTTP call; `undefined` when there was no answer (the service died, timed out). */
      async function call(method: string, path: string, body: unknown, key?: string) {
        try {
          const res = await fetch(`${base}${path}`, {
            method,
            headers: {
              "content-type": "application/json",
              ...(key ? { "idempotency-key": key } : {}),
              ...bearer(operator),
            },
            body: body === undefined ? null : JSON.stringify(body),
            signal: AbortSignal.timeout(patient(10_000)),
          });
          return { status: res.status, body: (await res.json()) as Record<string, unknown> };
        } catch {
          return undefined;
        }
      }

      // Two customers on each of the four shards (1/1 lives on the second server); the two MXN
      // wallets make cross-currency transfers that are refused and refunded.
      const selector = createCustomerSelector(world.shards.registry.shards);
      const wallets: { id: string; shard: string; currency: string }[] = [];
      const { placements, perShard } = customersOnEveryShard(selector, {
        shards: 4,
        perShard: 2,
        prefix: "soak",
      });
      for (const { region, tenant } of placements) {
        const currency = wallets.length === 3 || wallets.length === 6 ? "MXN" : "EUR";
        const customer = await call("POST", "/customers", { name: tenant, region, tenant }, randomUUID());
        const wallet = await call(
          "POST",
          `/customers/${customer!.body.id}/wallets`,
          { currency },
          randomUUID(),
        );
        const id = String(wallet!.body.id);
        wallets.push({ id, shard: ShardedUUID.shardOf(id).key, currency });
      }
      expect([...perShard.values()]).toEqual([2, 2, 2, 2]);

      // What clients know for sure: only answered calls count; the others are retried with their key.
      let deposited = 0n;
      let withdrawn = 0n;
      const transferIds = new Set<string>();
      const unanswered: { op: Op; key: string }[] = [];
      const answers = { ok: 0, refused: 0, unavailable: 0, noAnswer: 0 };
      async function run(op: Op, key: string = randomUUID()): Promise<void> {
        const res =
          op.kind === "transfer"
            ? await call(
                "POST",
                "/transfers",
                {
                  fromWalletId: wallets[op.from]!.id,
                  toWalletId: wallets[op.to]!.id,
                  amount: String(op.amount),
                },
                key,
              )
            : await call(
                "POST",
                `/wallets/${wallets[op.wallet]!.id}/${op.kind === "deposit" ? "deposits" : "withdrawals"}`,
                { amount: String(op.amount) },
                key,
              );
        if (res === undefined || res.status >= 500) {
          // No answer, or 503 (never a 500): the call may or may not have happened; retry it later.
          expect(res?.status ?? 503, JSON.stringify(res?.body)).toBe(503);
          if (res) answers.unavailable++;
          else answers.noAnswer++;
          unanswered.push({ op, key });
          return;
        }
        expect(res.body.error, JSON.stringify(res.body)).not.toBe("IDEMPOTENCY_CONFLICT");
        if (res.status >= 400) {
          answers.refused++;
          return;
        }
        answers.ok++;
        if (op.kind === "deposit") deposited += BigInt(op.amount);
        else if (op.kind === "withdraw") withdrawn += BigInt(op.amount);
        else transferIds.add(String(res.body.id));
      }
      /** Retries every unanswered call with its own key until each has an answer. */
      async function retryUnanswered() {
        for (let round = 0; unanswered.length > 0; round++) {
          if (round >= 60) throw new Error(`still unanswered: ${JSON.stringify(unanswered)}`);
          const again = unanswered.splice(0);
          await Promise.all(again.map(({ op, key }) => run(op, key)));
          if (unanswered.length > 0) await new Promise((r) => setTimeout(r, 250)); // a client's backoff
        }
      }

      const ops = fc.sample(fc.array(opArb(wallets.length), { minLength: 120, maxLength: 120 }), {
        seed: 20261201,
        numRuns: 1,
      })[0]!;
      const batches = Array.from({ length: ops.length / 10 }, (_, i) => ops.slice(i * 10, i * 10 + 10));
      const runBatch = (batch: Op[]) => Promise.all(batch.map((op) => run(op)));
      for (let w = 0; w < wallets.length; w++) await run({ kind: "deposit", wallet: w, amount: 10_000 });

      // 1. Work, then SIGKILL mid-batch: calls in flight get no answer; the service starts again.
      for (const batch of batches.slice(0, 2)) await runBatch(batch);
      const calls = [...batches[2]!, ...batches[3]!].map((op) => run(op));
      await Promise.race(calls); // the first answer: the others are on their way
      svc.kill();
      await svc.exited;
      await Promise.all(calls);
      ({ child: svc, base } = await service());
      await retryUnanswered();

      // 2. The second server is down for 3 s or more: many times the relay's retry budget (2
      // attempts, backoff 50-300 ms). Work on its shard gets 503; saga steps waiting for it wait.
      await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
        const began = Date.now();
        let next = 4;
        while (next < 6 || Date.now() - began < 3000) await runBatch(batches[next++ % 12]!);
      });
      await retryUnanswered();

      // 3. The second server frozen: its shard's calls end in 503 after the deadline, and a transfer
      // between two shards of the healthy server completes meanwhile (nothing waits on the frozen one).
      const euroOn = (shard: string) => wallets.findIndex((w) => w.shard === shard && w.currency === "EUR");
      await withClusterFrozen(SECOND.cluster, async () => {
        const transfer = { kind: "transfer", from: euroOn("0/0"), to: euroOn("1/0"), amount: 1 } as const;
        await run({ kind: "deposit", wallet: transfer.from, amount: 1 });
        const before = transferIds.size;
        await run(transfer);
        expect(transferIds.size).toBe(before + 1);
        const id = [...transferIds].at(-1)!;
        const until = Date.now() + 20_000;
        for (;;) {
          const res = await call("GET", `/transfers/${id}`, undefined);
          if (res?.body.status === "completed") break;
          if (Date.now() > until)
            throw new Error(`transfer ${id} between healthy shards stuck: ${JSON.stringify(res)}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        await runBatch(batches[6]!);
      });

      // 4. Healed: the rest of the work, every unanswered call retried, and the relays drain.
      for (const batch of batches.slice(7)) await runBatch(batch);
      await retryUnanswered();
      const until = Date.now() + 90_000;
      for (;;) {
        const events = await world.all<{ status: string }>("outboxEvent");
        const transfers = await world.all<Transfer>("transfer");
        if (events.every((e) => e.status === "delivered") && transfers.every((t) => t.status !== "pending"))
          break;
        if (Date.now() > until) {
          const counts: Record<string, number> = {};
          for (const e of events) counts[e.status] = (counts[e.status] ?? 0) + 1;
          throw new Error(
            `not drained: events ${JSON.stringify(counts)}, pending transfers ${transfers.filter((t) => t.status === "pending").length}`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      svc.kill();
      relay.kill();

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
      // The faults really happened: calls went unanswered and got 503s, and the second relay
      // delivered (each twice) and left deliveries hanging.
      expect(answers.noAnswer).toBeGreaterThan(0);
      expect(answers.unavailable).toBeGreaterThan(0);
      expect(relay.output()).toMatch(/delivered /);
      expect(relay.output()).toMatch(/hung /);
    },
    patient(300_000),
  );
});
