import { type ChildProcess, spawn } from "node:child_process";
import type { MoveResult } from "../src/index.js";
import { lineReader } from "./lines.js";

/** What a mover process printed at the end: its result, or its error's code, message and what it left. */
export type MoverOutcome =
  | { ok: true; result: MoveResult }
  | { ok: false; code: string; message: string; left?: string; rerun?: string | null; step?: string };

/**
 * A mover process (test/mover.ts: moves 0/1 from a to e, or to b with `TO: "b"`), started and ready
 * (`PAUSE_AFTER`: one step, or several joined by commas). `go()` starts the move;
 * `next()` reads its next line; `outcome()` waits for its last line (parsed); `exited` resolves with
 * its signal (SIGKILL for a mover that stopped itself, as a crash would).
 */
export async function startMover(
  urls: { a: string; b: string; e: string },
  env: {
    STOP_AFTER?: string;
    PAUSE_AFTER?: string;
    LEASE_MS?: string;
    VERIFY?: string;
    TO?: "b";
    COPY_TIMEOUT_MS?: string;
    FREEZE_BUDGET_MS?: string;
  } = {},
) {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "test/mover.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, MOVE_URLS: JSON.stringify(urls), ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on("exit", (_code, signal) => resolve(signal)),
  );
  const next = lineReader(child, "mover", 120_000);
  const ready = await next();
  if (ready !== "ready") throw new Error(`the mover said ${JSON.stringify(ready)} instead of ready`);
  return {
    child,
    pid: child.pid!,
    next,
    exited,
    /** Starts the move (or, paused, lets it go on). */
    go: () => void child.stdin!.write("go\n"),
    /** Its last line: the outcome of its move. */
    outcome: async () => JSON.parse(await next()) as MoverOutcome,
    /** SIGSTOP: frozen, as a host that stalls (its lease is not renewed meanwhile). */
    freeze: () => process.kill(child.pid!, "SIGSTOP"),
    thaw: () => process.kill(child.pid!, "SIGCONT"),
    kill: () => child.kill("SIGKILL"),
  };
}
