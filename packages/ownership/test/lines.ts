import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { patient } from "@shardkit/test-db";

/**
 * A child process's stdout, line by line: each call of the returned function resolves with the
 * next line. It rejects when the child's stdout ends first (it exited) or no line comes within
 * `patient(timeoutMs)` (scaled when each wait starts: a child on a busy machine is slow, not silent),
 * naming the child by `label`.
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
  return () =>
    new Promise<string>((resolve, reject) => {
      const line = queue.shift();
      if (line !== undefined) return resolve(line);
      if (ended !== undefined) return reject(new Error(ended));
      const limit = patient(timeoutMs);
      const timer = setTimeout(() => reject(new Error(`${label}: no line in ${limit} ms`)), limit);
      waiters.push({
        resolve(l) {
          clearTimeout(timer);
          resolve(l);
        },
        reject(error) {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
}
