// A mover process, as `shardkit move` is one: moves shard 0/1 from a to e (live; TO=b: to b, a
// database of a's own server). It says "ready",
// starts the move when a line arrives on stdin (so its start-up is not part of what a bench
// measures), and prints the move's result (or its error) as one JSON line.
//
// STOP_AFTER=<step>: SIGKILLs itself right after that step, as a crash there would.
// PAUSE_AFTER=<step>[,<step>...]: prints "paused <step>" after each of those steps and waits for a
// line on stdin before it goes on (a test freezes it meanwhile with SIGSTOP, as a host that stalls
// would, or tries a second mover there).
// LEASE_MS: the move's lease. VERIFY=0: `verify: false`. COPY_TIMEOUT_MS: `copyTimeoutMs`.
// FREEZE_BUDGET_MS: `freezeBudgetMs`.
import { createInterface } from "node:readline";
import { moveShard } from "../src/index.js";
import { routerOver, S } from "./layout.js";

const urls = JSON.parse(process.env.MOVE_URLS!) as { a: string; b: string; e: string };
const { databases, open } = routerOver(urls);
const map = await open();
const pauses = new Set((process.env.PAUSE_AFTER ?? "").split(",").filter(Boolean));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write("ready\n");
await lines.next();
const outcome = await moveShard({
  map,
  shard: S.g0m1,
  to: process.env.TO === "b" ? databases.b : databases.e,
  sourceConnection: urls.a,
  onProgress: () => {},
  ...(process.env.LEASE_MS ? { leaseMs: Number(process.env.LEASE_MS) } : {}),
  ...(process.env.VERIFY === "0" ? { verify: false } : {}),
  ...(process.env.COPY_TIMEOUT_MS ? { copyTimeoutMs: Number(process.env.COPY_TIMEOUT_MS) } : {}),
  ...(process.env.FREEZE_BUDGET_MS ? { freezeBudgetMs: Number(process.env.FREEZE_BUDGET_MS) } : {}),
  holder: `mover ${process.pid}`,
  afterStep: async (step) => {
    if (step === process.env.STOP_AFTER) process.kill(process.pid, "SIGKILL");
    if (pauses.has(step)) {
      process.stdout.write(`paused ${step}\n`);
      await lines.next();
    }
  },
}).then(
  (result) => ({ ok: true as const, result }),
  (error: unknown) => ({
    ok: false as const,
    code: (error as { code?: unknown }).code,
    message: String((error as Error).message ?? error),
    left: (error as { left?: unknown }).left,
    rerun: (error as { rerun?: unknown }).rerun,
    step: (error as { step?: unknown }).step,
  }),
);
process.stdout.write(`${JSON.stringify(outcome)}\n`);
process.exit(0);
