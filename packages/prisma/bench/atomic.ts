// pnpm bench (in packages/prisma): what atomic commit costs. One transfer between two wallets on
// two databases of one server (max_prepared_transactions > 0), as a best-effort action
// (`allowCrossShard`: one transaction per database) and as an atomic one (two-phase commit), calls
// alternating in a rotating order; medians, and the atomic one as a ratio of the best-effort one.
// Also a single-shard write on a third database while atomic transfers run, against the same write
// alone: the atomic actions' effect on another shard's latency. And what the `SET LOCAL lock_timeout`
// each participant sends first costs: an empty transaction with and without it.
//
// BENCH_ROUNDS (default 400): timed calls per variant.
import { ShardedId } from "@shardkit/id";
import { atomicDatabases, atomicRouter, S, stageTransfer, walletOn } from "../test/atomic-world.js";
import { measure, median } from "./measure.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 400);
const WARMUP = 100;

const { urls, release } = await atomicDatabases("bench");
const router = atomicRouter(urls);
try {
  const a = await walletOn(router, S.g0m0, 1_000_000n);
  const b = await walletOn(router, S.g1m1, 0n);
  const other = await walletOn(router, S.g0m2, 0n);
  const transfer = (atomic: boolean) => () =>
    router.db.$action(
      (unit) =>
        stageTransfer(unit, { id: ShardedId.generate("Customer", S.g0m0), from: a, to: b, amount: 1n }),
      atomic ? { atomic: true } : { allowCrossShard: true },
    );
  // What each participant's `SET LOCAL lock_timeout` adds: one more round trip in a transaction on
  // one database (the participants prepare at once, so the action waits for it once).
  const lockTimeout = (set: boolean) => () =>
    router.clients[0]!.$transaction(async (tx) => {
      if (set) await tx.$executeRawUnsafe("SET LOCAL lock_timeout = 5000");
    });
  const [bestEffort, atomic, bare, withLockTimeout] = await measure(
    [
      { name: "best-effort", run: transfer(false) },
      { name: "atomic", run: transfer(true) },
      { name: "transaction", run: lockTimeout(false) },
      { name: "transaction + SET LOCAL lock_timeout", run: lockTimeout(true) },
    ],
    WARMUP,
    ROUNDS,
  );
  const touch = () => router.db.wallet.update({ where: { id: other }, data: { balance: { increment: 1n } } });
  const time = async (n: number) => {
    const xs: number[] = [];
    for (let i = 0; i < n; i++) {
      const start = performance.now();
      await touch();
      xs.push(performance.now() - start);
    }
    return median(xs);
  };
  const alone = await time(ROUNDS);
  let running = true;
  const load = (async () => {
    while (running) await transfer(true)();
  })();
  const beside = await time(ROUNDS);
  running = false;
  await load;
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  console.log(`two-shard transfer, best-effort (one transaction per database): ${ms(bestEffort!)}`);
  console.log(
    `two-shard transfer, atomic (two-phase commit): ${ms(atomic!)} (x${(atomic! / bestEffort!).toFixed(2)})`,
  );
  const extra = withLockTimeout! - bare!;
  console.log(
    `lock_timeout's round trip: an empty transaction ${ms(bare!)}, with SET LOCAL lock_timeout ${ms(withLockTimeout!)}: +${ms(extra)}, ${((100 * extra) / atomic!).toFixed(1)}% of an atomic transfer`,
  );
  console.log(
    `another shard's single-row update: alone ${ms(alone)}, beside atomic transfers ${ms(beside)} (x${(beside / alone).toFixed(2)})`,
  );
} finally {
  await router.close();
  await release();
}
