// Recovery by another process, for the atomic-action fault tests: a router of its own over `urls`
// runs recovery rounds (lease 0) until nothing of shardkit's is prepared on any database, then prints
// `outcomes {gid: outcome}` (what it did to each prepared transaction it ended) and exits.
import { atomicRouter, preparedGids } from "./atomic-world.js";

const { urls } = JSON.parse(process.env.ATOMIC_RECOVER!) as { urls: string[] };
const router = atomicRouter(urls);
const outcomes: Record<string, string> = {};
try {
  for (let round = 0; ; round++) {
    const report = await router.db.$recoverAtomic({ leaseMs: 0 });
    for (const t of report.transactions) if (t.outcome !== "left") outcomes[t.gid] = t.outcome;
    if ((await preparedGids(urls)).length === 0) break;
    if (round === 200)
      throw new RangeError(`still prepared after ${round} rounds: ${JSON.stringify(report)}`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // a lock a dead session held may take a moment
  }
  process.stdout.write(`outcomes ${JSON.stringify(outcomes)}\n`);
} finally {
  await router.close();
}
