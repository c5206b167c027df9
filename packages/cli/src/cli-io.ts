// Where the `shardkit` command line reads and writes: the process's own streams by default, others
// in tests.
import type { Command } from "commander";
import type { ProgressStream } from "./progress.js";

/** Where `run` reads and writes: the process's own streams by default. */
export interface CliIo {
  stdout: ProgressStream;
  /** Progress, warnings and error messages. */
  stderr: ProgressStream;
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** The text of standard input (for `analyze -`). */
  stdin?: () => Promise<string>;
  /** Ends a command that runs until stopped (`dashboard`) as Ctrl-C does. */
  signal?: AbortSignal;
}

/** The process's own streams, environment and folder. */
export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    cwd: process.cwd(),
    stdin: readStdin,
  };
}

/** Standard input, read to its end. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Runs a command and prints its report (JSON or text); its `ok` decides 0 or 1, an error its exit
 * code (`run.ts`).
 */
export type Execute = <O, R extends { ok: boolean; exitCode?: number }>(
  name: string,
  fn: (options: O) => Promise<[R, (report: R) => string]>,
) => (options: O & { json?: boolean }) => Promise<void>;

/**
 * What a module of commands is added with: the program, where it reads and writes, how a command
 * runs, the flags every command has (`common`) and where the configuration is read (`config`).
 */
export interface CommandContext {
  program: Command;
  io: CliIo;
  execute: Execute;
  common: (command: Command) => Command;
  config: (options: { config?: string }) => Record<string, unknown>;
}
