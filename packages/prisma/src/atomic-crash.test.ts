import { type ChildProcess, spawn } from "node:child_process";
import { ShardedId } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  eachDatabase,
  ledger,
  preparedGids,
  recoverAll as recoverWorld,
  S,
  stageTransfer,
  useAtomicWorld,
  walletOn,
} from "../test/atomic-world.js";
import type { AtomicPoint } from "./atomic.js";

// Coordinators stopped for good at each point of the protocol (a process killed with SIGKILL, or an
// action whose coordinator never goes on): after recovery by another router, every action is all
// or nothing, counted row by row, the money is all there, and nothing is left prepared.

const world = useAtomicWorld("crash");
const recoverAll = () => recoverWorld(world.router, world.urls);

function startChild(env: object): {
  child: ChildProcess;
  stopped: Promise<string>;
  exited: Promise<unknown>;
} {
  const child = spawn("pnpm", ["exec", "tsx", "test/atomic-child.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, ATOMIC_CHILD: JSON.stringify(env) },
    stdio: ["pipe", "pipe", "inherit"],
    detached: true,
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stopped = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = /^(stopped \S+|done)$/m.exec(out);
      if (line) resolve(line[1]!);
    });
    child.on("exit", (code) => reject(new Error(`the coordinator exited (${code}) before its stop: ${out}`)));
  });
  return { child, stopped, exited };
}

describe("a coordinator killed with SIGKILL at each step of an atomic action", () => {
  const cases: { stopAt: string; committed: boolean }[] = [
    { stopAt: "prepared-one", committed: false },
    { stopAt: "prepared-all", committed: false },
    { stopAt: "decided", committed: true },
    { stopAt: "committed", committed: true },
  ];
  for (const { stopAt, committed } of cases) {
    it(`killed after ${stopAt}: recovery ${committed ? "commits" : "rolls back"} it on every database`, async () => {
      const from = await walletOn(world.router, S.g0m0, 100n);
      const to = await walletOn(world.router, S.g0m2, 0n);
      const fee = await walletOn(world.router, S.g1m1, 0n);
      const id = ShardedId.generate("Customer", S.g0m0);
      const { child, stopped, exited } = startChild({
        urls: world.urls,
        stopAt,
        from,
        to,
        fee,
        id,
        amount: "40",
      });
      try {
        expect(await stopped).toBe(`stopped ${stopAt}`);
      } finally {
        process.kill(-child.pid!, "SIGKILL");
        await exited;
      }
      const before = await preparedGids(world.urls);
      expect(before.length).toBeGreaterThan(0); // the crash left work in doubt
      await recoverAll();
      const { sides, total } = await ledger(world.urls);
      expect(sides.get(id) ?? []).toEqual(committed ? ["credit", "debit", "fee"] : []);
      expect(total).toBe(100n);
      const balances = await Promise.all(
        [from, to, fee].map(
          async (w) => (await world.router.db.wallet.findUnique({ where: { id: w } }))!.balance,
        ),
      );
      expect(balances).toEqual(committed ? [59n, 40n, 1n] : [100n, 0n, 0n]);
    });
  }
});

describe("property: atomic transfers between wallets on several databases, with coordinators stopped at random points", () => {
  it(
    "after recovery, the money is all there and every transfer is all or nothing",
    async () => {
      const shards = [S.g0m0, S.g0m1, S.g0m2, S.g1m0, S.g1m1, S.g1m2];
      const databaseOf = (i: number) => Math.floor(i / 2); // two shards per database, as LAYOUT
      const transfer = fc
        .record({
          from: fc.integer({ min: 0, max: 5 }),
          to: fc.integer({ min: 0, max: 5 }),
          amount: fc.bigInt({ min: 1n, max: 50n }),
          stop: fc.constantFrom<AtomicPoint | "none">("none", "prepared", "decided", "committed"),
        })
        .filter((t) => databaseOf(t.from) !== databaseOf(t.to));
      await fc.assert(
        fc.asyncProperty(fc.array(transfer, { minLength: 1, maxLength: 6 }), async (transfers) => {
          await recoverAll();
          await eachDatabase(
            world.urls,
            `TRUNCATE "OutboxEvent", "Wallet", "Customer", "AtomicDecision" CASCADE`,
          );
          const wallets = await Promise.all(shards.map((s) => walletOn(world.router, s, 100n)));
          const ids: string[] = [];
          for (const t of transfers) {
            const id = ShardedId.generate("Customer", S.g0m0);
            ids.push(id);
            const staged = { id, from: wallets[t.from]!, to: wallets[t.to]!, amount: t.amount };
            if (t.stop === "none") {
              await world.router.db.$action((unit) => stageTransfer(unit, staged), { atomic: true });
              continue;
            }
            // A coordinator that stops for good at its point (at "prepared": once both databases
            // prepared, each branch stopped there); another router recovers behind it.
            let reached!: () => void;
            const stoppedThere = new Promise<void>((resolve) => (reached = resolve));
            let prepared = 0;
            void world.router.db
              .$action((unit) => stageTransfer(unit, staged), {
                atomic: true,
                atomicProbe: (at) => {
                  if (at !== t.stop) return undefined;
                  if (at === "prepared" && ++prepared < 2) return new Promise<void>(() => {});
                  reached();
                  return new Promise<void>(() => {});
                },
              })
              .catch(() => {});
            await stoppedThere;
            await recoverAll();
          }
          await recoverAll();
          const { sides, total } = await ledger(world.urls);
          expect(total).toBe(600n);
          for (const id of ids) expect([[], ["credit", "debit"]]).toContainEqual(sides.get(id) ?? []);
          const balances = await eachDatabase<{ n: string }>(
            world.urls,
            `SELECT sum(balance)::text AS n FROM "Wallet"`,
          );
          expect(balances.flat().reduce((s, r) => s + BigInt(r.n), 0n)).toBe(600n);
        }),
        { numRuns: 12 },
      );
    },
    patient(300_000),
  );
});
