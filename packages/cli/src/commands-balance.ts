// `shardkit balance` and `shardkit drain`: their flags, and how they call `balance.ts` (imported
// when they run). Ctrl-C stops them after the move under way.
import { type Command, Option } from "commander";
import type { BalanceReport } from "./balance.js";
import type { CommandContext } from "./cli-io.js";
import { byOption, collect, fraction, type MoveFlags, moveOptions, positiveInt } from "./flags.js";
import { createProgress } from "./progress.js";

/**
 * Adds `balance` and `drain` to `program` (`common`: the flags every command has; `config`: where the configuration is read).
 * Longer than 80 lines: the balance and drain commands' flags and help, as `--help` lists them.
 */
export function addBalanceCommands({ program, io, execute, common, config }: CommandContext): void {
  const balanceCommand = (command: Command, drain: boolean) => {
    common(command)
      .option(
        "--table <Table[:column[:bits]]>",
        "a table of yours holding shard rows (repeat for each), as for move; @shardkit/prisma's own tables are added",
        collect,
      )
      .option("--dry-run", "measure and print the plan; change nothing")
      .option(
        "--window <ms>",
        "the load measured: what routers recorded in the last <ms>",
        positiveInt("--window"),
        300_000,
      )
      .addOption(byOption())
      .option(
        "--threshold <fraction>",
        "nothing to do while the most loaded database is within this fraction of the mean (default 0.1)",
        fraction("--threshold"),
      )
      .option(
        "--min-improvement <fraction>",
        "a move must lower its busier database's load by this fraction of the mean (default 0.02)",
        fraction("--min-improvement"),
      )
      .option(
        "--max-moves <n>",
        `moves in this run (default ${drain ? "every shard of the database" : "4"})`,
        positiveInt("--max-moves"),
      )
      .option("--max-bytes <n>", "bytes moved in this run (default unlimited)", positiveInt("--max-bytes"))
      .option(
        "--max-p99 <ms>",
        "before each move, wait while another shard's p99 over the last minute is above this",
        positiveInt("--max-p99"),
      )
      .option(
        "--max-pause <ms>",
        "how long one such wait may last before the balance stops (default 300000)",
        positiveInt("--max-pause"),
      )
      .addOption(
        new Option("--mode <mode>", "live or offline moves").choices(["live", "offline"]).default("live"),
      )
      .option("--no-verify", "moves compare row counts only, not checksums")
      .option("--no-cleanup", "moves keep the old copy at the source")
      .option(
        "--timeout <ms>",
        "how long each database may take to answer a read",
        positiveInt("--timeout"),
        10_000,
      )
      .option("--copy-timeout <ms>", "as for move", positiveInt("--copy-timeout"))
      .option("--lease <ms>", "as for move", positiveInt("--lease"))
      .option("--max-freeze <ms>", "as for move", positiveInt("--max-freeze"))
      .option("--no-progress", "no progress on stderr")
      .addHelpText(
        "after",
        drain
          ? "\nExample: shardkit drain sk_b --table Wallet --dry-run\nCtrl-C stops after the move under way; run it again to go on."
          : "\nExample: shardkit balance --table Wallet --dry-run\nCtrl-C stops after the move under way; run it again to go on.",
      );
    return command;
  };
  type BalanceFlags = MoveFlags & {
    config?: string;
    table?: string[];
    dryRun?: boolean;
    window: number;
    by: "time" | "calls" | "writes";
    threshold?: number;
    minImprovement?: number;
    maxMoves?: number;
    maxBytes?: number;
    maxP99?: number;
    maxPause?: number;
    progress: boolean;
    json?: boolean;
  };
  const runBalance = (o: BalanceFlags, drain: string | undefined) =>
    execute<BalanceFlags, BalanceReport>(drain === undefined ? "balance" : "drain", async () => {
      const { balance, describeBalanceEvent, renderBalance } = await import("./balance.js");
      const progress = createProgress(io.stderr, {
        title: drain === undefined ? "balance" : "drain",
        total: 0,
        enabled: o.progress && !o.dryRun,
      });
      // Ctrl-C: the move under way ends (moved, or undone), no other starts; a second one exits.
      const stop = new AbortController();
      const onSigint = () => {
        io.stderr.write("stopping after the move under way (Ctrl-C again to exit now)\n");
        stop.abort();
        process.off("SIGINT", onSigint);
      };
      process.on("SIGINT", onSigint);
      let moves = 0;
      try {
        const report = await balance({
          ...config(o),
          tables: o.table ?? [],
          ...(drain !== undefined ? { drain } : {}),
          dryRun: o.dryRun ?? false,
          windowMs: o.window,
          by: o.by,
          ...(o.threshold !== undefined ? { threshold: o.threshold } : {}),
          ...(o.minImprovement !== undefined ? { minImprovement: o.minImprovement } : {}),
          ...(o.maxMoves !== undefined ? { maxMoves: o.maxMoves } : {}),
          ...(o.maxBytes !== undefined ? { maxBytes: o.maxBytes } : {}),
          ...(o.maxP99 !== undefined ? { maxP99Ms: o.maxP99 } : {}),
          ...(o.maxPause !== undefined ? { maxPauseMs: o.maxPause } : {}),
          ...moveOptions(o),
          signal: stop.signal,
          onEvent: (event) => {
            if (event.type === "measured") progress.setTotal(event.plan.moves.length);
            if (event.type === "moved") moves++;
            progress.update(moves, describeBalanceEvent(event));
          },
        });
        return [report, renderBalance];
      } finally {
        process.off("SIGINT", onSigint);
        progress.stop();
      }
    })(o);

  balanceCommand(program.command("balance"), false)
    .description(
      "move logical shards off the most loaded databases, by the load routers measured, one live move at a time",
    )
    .action((options: BalanceFlags) => runBalance(options, undefined));

  balanceCommand(program.command("drain"), true)
    .description("move every shard off a database (to decommission it), honouring placement rules")
    .argument("<database>", "the database to empty: its URL, printed name, or database name")
    .action((database: string, options: BalanceFlags) => runBalance(options, database));
}
