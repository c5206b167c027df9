import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { within } from "@shardkit/test-db";

/**
 * A child process's stdout, line by line: each call of the returned function resolves with the
 * next line. It rejects when the child's stdout ends first (it exited) or no line comes within
 * `timeoutMs` (test-db's `within`: scaled when each wait starts, since a child on a busy machine is
 * slow, not silent), naming the child by `label`.
 */
export function lineReader(child: ChildProcess, label: string, timeoutMs = 60_000): () => Promise<string> {
  const queue: string[] = [];
  const waiters: { resolve(line: string): void; reject(error: Error): void }[] = [];
  let ended: string | undefined;
  const lines = createInterface({ input: child.stdout! });
  lines.on("line", (line) => {
    const waiter = waiters.shift();
    if (waiter) waiter.resolve(line);
    else queue.push(line);
  });
  lines.on("close", () => {
    ended = `${label}: its output ended (exit code ${child.exitCode ?? child.signalCode ?? "unknown"})`;
    for (const waiter of waiters.splice(0)) waiter.reject(new Error(ended));
  });
  return () => {
    const line = queue.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (ended !== undefined) return Promise.reject(new Error(ended));
    return within(
      new Promise<string>((resolve, reject) => waiters.push({ resolve, reject })),
      timeoutMs,
      `${label}: no line`,
    );
  };
}
