// A balance process, as `shardkit balance` is one: `runBalance` (live moves) over the test databases
// (0/0 and 0/1 on a, 1/0 on b, e a spare), printing its report as one JSON line.
//
// KILL_AT=<step>: SIGKILLs itself when its first move reaches that step (the step before it done),
// as a crash there would. LEASE_MS: the moves' lease and the fleet's balance lease.
import { runBalance } from "../src/index.js";
import { routerOver, TABLES } from "./layout.js";

const urls = JSON.parse(process.env.MOVE_URLS!) as Record<"a" | "b" | "e", string>;
const { registry } = routerOver(urls);
const report = await runBalance({
  registry,
  tables: TABLES,
  mode: "live",
  sourceConnection: (source) => urls[source.name as "a" | "b" | "e"],
  ...(process.env.LEASE_MS ? { leaseMs: Number(process.env.LEASE_MS) } : {}),
  onEvent: (event) => {
    if (event.type === "step" && event.index === 0 && event.progress.step === process.env.KILL_AT)
      process.kill(process.pid, "SIGKILL");
  },
});
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exit(0);
