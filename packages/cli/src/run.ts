// The `shardkit` command line: its exit codes, how a command's report or error is printed (text or
// one JSON document) and turned into an exit code, and the program's own flags and help. The
// commands themselves are `commands.ts`.
import { isShardkitError } from "@shardkit/id";
import { Command, CommanderError } from "commander";
import pkg from "../package.json" with { type: "json" };
import { type CliIo, processIo } from "./cli-io.js";
import { addCommands } from "./commands.js";
import { oneLine } from "./format.js";

export type { CliIo } from "./cli-io.js";

/** The exit codes of `shardkit`. */
export const ExitCode = {
  /** Done, nothing wrong. */
  OK: 0,
  /** Problems found (doctor's errors, unreachable databases in status) or the operation failed (a rollout or move that stopped). */
  PROBLEMS: 1,
  /** Usage, configuration or input errors: nothing was done. */
  USAGE: 2,
  /**
   * A move stopped half-done and could not undo itself: the shard may be fenced (until its lease
   * lapses, when routers give it back to its owner) or switched (owned by the target once it
   * answers). Run the same `shardkit move` again: it finishes or undoes it first.
   */
  HALF_DONE: 3,
  /**
   * `shardkit recover`: atomic actions are left in doubt that a later run concludes (prepared
   * transactions within their coordinator's lease; with --dry-run, any it found). Run it again
   * after the lease.
   */
  IN_DOUBT: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Errors of the caller's making: exit code 2. Anything else that stops a command is 1. */
const USAGE_CODES = new Set([
  "INVALID_USAGE",
  "CONFIG_UNAVAILABLE",
  "INVALID_SAMPLE_FILE",
  "UNKNOWN_DATABASE",
  "INVALID_CONFIG",
  "INVALID_SHARD",
  "INVALID_SCORECARD_INPUT",
  "INVALID_OWNERSHIP_OPTIONS",
  "INVALID_ROLLOUT_OPTIONS",
  "INVALID_ROUTING_OPTIONS",
  "BALANCE_INPUT",
  "ADDRESS_IN_USE",
]);

/** The exit code for an error a command threw. */
export function exitCodeOf(error: unknown): ExitCode {
  if (isShardkitError(error, "MOVE_FAILED") && (error as { left?: unknown }).left === "half-done")
    return ExitCode.HALF_DONE;
  return isShardkitError(error) && USAGE_CODES.has(error.code) ? ExitCode.USAGE : ExitCode.PROBLEMS;
}

const HELP_AFTER = `
Configuration: --config <file>, or the SHARDKIT_SHARDS environment variable: the apps' own JSON,
[{ "group", "member", "url", "pool"?, "labels"? }, ...] or { "shards": [...], "databases": [...],
"placement"?: [{ "groups", "labels" }] }.

Exit codes: 0 ok; 1 problems found (doctor; status with unreachable or slow databases, ownership
records that cannot be right, a stopped move or replication objects no move holds; move --dry-run
whose precheck fails; redrive with a database that did not answer; a balance that could not
plan; recover with a database that did not answer or an atomic action it cannot conclude) or the operation failed with nothing left half-done (a move refused, or undone); 2 usage, configuration or input errors; 3 a
move left half-done (run the same move again: it finishes or undoes it first); 4 recover left
atomic actions in doubt within their coordinator's lease (run it again after the lease). --json prints
one JSON document on stdout; progress and messages go to stderr (a bar on a terminal, plain lines
otherwise).`;

/**
 * The `shardkit` command line: parses `argv` (without `node` and the script), runs the command and
 * resolves with its exit code (never throws, never exits the process).
 */
export async function run(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let exitCode: number = ExitCode.OK;

  /**
   * Runs a command and prints its report (JSON or text); its `ok` decides 0 or 1. Each command's
   * module is imported when it runs, so `--help`, `--version` and `analyze` never load Prisma.
   */
  const execute =
    <O, R extends { ok: boolean; exitCode?: number }>(
      name: string,
      fn: (options: O) => Promise<[R, (report: R) => string]>,
    ) =>
    async (options: O & { json?: boolean }) => {
      try {
        const [report, render] = await fn(options);
        io.stdout.write(options.json ? `${toJson(report)}\n` : render(report));
        // A report may say which code (recover's 4); otherwise its `ok` decides 0 or 1.
        exitCode = report.exitCode ?? (report.ok ? ExitCode.OK : ExitCode.PROBLEMS);
      } catch (error) {
        exitCode = exitCodeOf(error);
        const message = isShardkitError(error) ? error.message : oneLine(error);
        io.stderr.write(`shardkit ${name}: ${message}\n`);
        if (options.json) {
          const code = isShardkitError(error) ? error.code : ((error as { code?: unknown })?.code ?? null);
          const { issues, step, left, rerun } = (error ?? {}) as Record<string, unknown>;
          io.stdout.write(
            `${toJson({
              ok: false,
              error: {
                code,
                message,
                ...(Array.isArray(issues) ? { issues } : {}),
                ...(isShardkitError(error, "MOVE_FAILED") ? { step, left, rerun } : {}),
              },
            })}\n`,
          );
        }
      }
    };

  const program = new Command("shardkit")
    .description(
      "Operate sharded PostgreSQL: status, schema rollout, shard moves, dead letters, shard keys, checks.",
    )
    .version(pkg.version)
    .showHelpAfterError("(shardkit <command> --help for usage)")
    .exitOverride()
    .configureOutput({ writeOut: (s) => void io.stdout.write(s), writeErr: (s) => void io.stderr.write(s) })
    .addHelpText("after", HELP_AFTER);

  addCommands(program, io, execute);

  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    io.stderr.write(`shardkit: ${oneLine(error)}\n`);
    return ExitCode.PROBLEMS;
  }
  return exitCode;
}

function toJson(value: unknown): string {
  return JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v), 2);
}
