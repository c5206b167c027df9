// The commands of `shardkit`, in the order `--help` lists them: each one's arguments and flags, and
// how it calls its module (imported when it runs, so `--help`, `--version` and `analyze` never load
// Prisma). Printing the report, the exit code and errors are `run.ts`'s.
import { type Command, InvalidArgumentError, Option } from "commander";
import type { AnalyzeReport } from "./analyze.js";
import { type CliIo, type Execute, readStdin } from "./cli-io.js";
import { addBalanceCommands } from "./commands-balance.js";
import { addDashboardCommand } from "./commands-dashboard.js";
import type { DoctorReport } from "./doctor.js";
import { collect, leaseOption, type MoveFlags, moveOptions, positiveInt } from "./flags.js";
import type { MoveReport } from "./move.js";
import { createProgress } from "./progress.js";
import type { RecoverReport } from "./recover.js";
import type { RedriveReport } from "./redrive.js";
import type { RolloutReport } from "./rollout.js";
import type { StatusReport } from "./status.js";

export type { Execute };

/**
 * Adds every command of `shardkit` to `program`.
 * Longer than 80 lines: each command's flags and help, in the order `shardkit --help` lists them.
 */
export function addCommands(program: Command, io: CliIo, execute: Execute): void {
  const config = (options: { config?: string }) => ({
    ...(options.config !== undefined ? { config: options.config } : {}),
    ...(io.env ? { env: io.env } : {}),
    ...(io.cwd ? { cwd: io.cwd } : {}),
  });

  const common = (command: Command) =>
    command
      .option("-c, --config <file>", "the shard configuration (JSON); default: $SHARDKIT_SHARDS")
      .option("--json", "print one JSON document on stdout");

  common(program.command("status"))
    .description(
      "each shard's database, epoch, owner state and reachability; each database's outbox lag and dead letters",
    )
    .option("--timeout <ms>", "how long each database may take to answer", positiveInt("--timeout"), 5000)
    .addOption(leaseOption())
    .addHelpText("after", "\nExit code 1 when a database does not answer (the table names it).")
    .action(
      execute<{ config?: string; timeout: number; lease: number }, StatusReport>("status", async (o) => {
        const { status, renderStatus } = await import("./status.js");
        return [await status({ ...config(o), timeoutMs: o.timeout, leaseMs: o.lease }), renderStatus];
      }),
    );

  common(program.command("rollout"))
    .description(
      "the schema (push) or migrations (migrate) to every database of the configuration, with progress",
    )
    .option("--schema <path>", "a schema.prisma file or a folder of .prisma files: push it")
    .option("--migrations <folder>", "a Prisma migrations folder: apply it")
    .option("--accept-data-loss", "push even when it drops data")
    .option(
      "--concurrency <n>",
      "how many databases the schema engine works on at once",
      positiveInt("--concurrency"),
      1,
    )
    .option("--no-progress", "no progress on stderr")
    .action(
      execute<
        {
          config?: string;
          schema?: string;
          migrations?: string;
          acceptDataLoss?: boolean;
          concurrency: number;
          progress: boolean;
        },
        RolloutReport
      >("rollout", async (o) => {
        const { rollout, renderRollout, describeRolloutEvent } = await import("./rollout.js");
        const progress = createProgress(io.stderr, { title: "rollout", total: 0, enabled: o.progress });
        // The bar counts databases finished: with several at once they finish in any order.
        let finished = 0;
        try {
          const report = await rollout({
            ...config(o),
            ...(o.schema !== undefined ? { schema: o.schema } : {}),
            ...(o.migrations !== undefined ? { migrations: o.migrations } : {}),
            acceptDataLoss: o.acceptDataLoss ?? false,
            concurrency: o.concurrency,
            onProgress: (event) => {
              progress.setTotal(event.total);
              if (event.type !== "start") finished++;
              progress.update(finished, describeRolloutEvent(event));
            },
          });
          return [report, renderRollout];
        } finally {
          progress.stop();
        }
      }),
    );

  common(program.command("move"))
    .description("move a logical shard to another database, live (logical replication) or offline")
    .argument("<shard>", "the logical shard, group/member (e.g. 0/1)")
    .requiredOption("--to <database>", "the new owner: its URL, printed name, or database name")
    .option(
      "--table <Table[:column[:bits]]>",
      "a table of yours holding shard rows (repeat for each); column id by default, :bits for an integer shard column. @shardkit/prisma's own tables that the databases have are added",
      collect,
    )
    .addOption(new Option("--mode <mode>", "live or offline").choices(["live", "offline"]).default("live"))
    .option(
      "--source-connection <url>",
      "live: how the target's server reaches the source (default: its configured URL)",
    )
    .option(
      "--no-verify",
      "compare row counts only, not checksums (the switch still takes only a copy this move checked)",
    )
    .option("--no-cleanup", "keep the old copy at the source (its tombstone refuses writes)")
    .option(
      "--timeout <ms>",
      "how long each database may take to answer (the map, the move records, the checks); one that takes longer is named, and nothing changes",
      positiveInt("--timeout"),
      10_000,
    )
    .option(
      "--copy-timeout <ms>",
      "live: how long the copy and catch-up may take before the move is undone; also how long each other statement of the move may wait for its database (default 120000)",
      positiveInt("--copy-timeout"),
    )
    .option(
      "--lease <ms>",
      "the move's lease: a mover that dies holds the shard at most this long (default 10000)",
      positiveInt("--lease"),
    )
    .option(
      "--max-freeze <ms>",
      "how long the shard's writes may wait (fence to switch) before the move is undone; a mover stuck there holds them no longer (default 10000 live, the copy timeout offline)",
      positiveInt("--max-freeze"),
    )
    .option(
      "--dry-run",
      "check the arguments, run the move's precheck and show the plan; change nothing (exit 1 when the precheck finds a problem)",
    )
    .option("--no-progress", "no progress on stderr")
    .addHelpText("after", "\nExample: shardkit move 0/1 --to sk_e --table Wallet --table Transfer")
    .action(async (shard: string, options) => {
      type O = MoveFlags & {
        config?: string;
        to: string;
        table?: string[];
        sourceConnection?: string;
        dryRun?: boolean;
        progress: boolean;
        json?: boolean;
      };
      const o = options as O;
      await execute<O, MoveReport & { ok: boolean }>("move", async () => {
        const { move, moveOk, describeMoveProgress, renderMove } = await import("./move.js");
        const { moveSteps } = await import("@shardkit/ownership");
        const steps = moveSteps(o.mode, { cleanup: o.cleanup });
        const progress = createProgress(io.stderr, {
          title: `move ${shard}`,
          total: steps.length,
          enabled: o.progress && !o.dryRun,
        });
        const seen: string[] = [];
        let lastLine = 0;
        try {
          const report = await move({
            ...config(o),
            shard,
            to: o.to,
            tables: o.table ?? [],
            ...moveOptions(o),
            ...(o.sourceConnection !== undefined ? { sourceConnection: o.sourceConnection } : {}),
            dryRun: o.dryRun ?? false,
            onProgress: (p) => {
              const fresh = !seen.includes(p.step);
              if (fresh) {
                seen.push(p.step);
                if (p.step === "resume") progress.setTotal(steps.length + 1);
              }
              // Plain lines: one per step, and at most one a second while a step waits (catch-up).
              if (fresh || p.rows !== undefined || io.stderr.isTTY || Date.now() - lastLine >= 1000) {
                lastLine = Date.now();
                progress.update(seen.length, describeMoveProgress(p));
              }
            },
          });
          return [{ ...report, ok: moveOk(report) }, renderMove];
        } finally {
          progress.stop();
        }
      })(o);
    });

  addBalanceCommands({ program, io, execute, common, config });

  common(program.command("redrive"))
    .description("dead letters back to pending, for the services' relays to deliver again")
    .option("--topic <topic>", "only dead letters of this topic")
    .option("--id <id>", "only this event (repeat for more)", collect)
    .action(
      execute<{ config?: string; topic?: string; id?: string[] }, RedriveReport>("redrive", async (o) => {
        const { redrive, renderRedrive } = await import("./redrive.js");
        const report = await redrive({
          ...config(o),
          ...(o.topic !== undefined ? { topic: o.topic } : {}),
          ...(o.id ? { ids: o.id } : {}),
        });
        return [report, renderRedrive];
      }),
    );

  common(program.command("recover"))
    .description(
      "conclude atomic actions left in doubt (prepared transactions whose coordinator died) on every database",
    )
    .addOption(leaseOption())
    .option("--timeout <ms>", "how long each database may take to answer", positiveInt("--timeout"), 5000)
    .option("--dry-run", "list the prepared transactions and what recover would do; change nothing")
    .option("--no-progress", "no progress on stderr")
    .addHelpText(
      "after",
      `
Commits where the deciding database recorded commit, rolls back where no decision was recorded and
the coordinator's lease lapsed, and leaves (naming them) those still within it.
Exit codes: 0 nothing left in doubt (--dry-run: none found); 4 some left within their lease (run
again after it; --dry-run: some found); 1 a database did not answer, or an action's deciding
database is not in the configuration; 2 usage or configuration errors.`,
    )
    .action(
      execute<
        { config?: string; lease: number; timeout: number; dryRun?: boolean; progress: boolean },
        RecoverReport
      >("recover", async (o) => {
        const { recover, renderRecover, describeRecovered } = await import("./recover.js");
        const progress = createProgress(io.stderr, { title: "recover", total: 0, enabled: o.progress });
        try {
          const report = await recover({
            ...config(o),
            leaseMs: o.lease,
            timeoutMs: o.timeout,
            dryRun: o.dryRun ?? false,
            onProgress: (e) => {
              progress.setTotal(e.found);
              if (e.entry) progress.update(e.done, describeRecovered(e.entry));
            },
          });
          return [report, renderRecover];
        } finally {
          progress.stop();
        }
      }),
    );

  program
    .command("analyze")
    .description("the shard-key scorecard of candidate keys over a traffic sample, side by side")
    .argument("<file>", "a JSON-lines file, one sampled operation per line (- for stdin)")
    .requiredOption(
      "-k, --key <path|label=path>",
      "a candidate key's field (repeat for each candidate)",
      collect,
    )
    .requiredOption(
      "-m, --members <n|list>",
      "members to spread keys over: a count, or numbers (0,3,9)",
      (value) => {
        if (/^\d+$/.test(value)) return Number(value);
        if (/^\d+(,\d+)+$/.test(value)) return value.split(",").map(Number);
        throw new InvalidArgumentError(
          "expected a count (8) or a comma-separated list of member numbers (0,3,9).",
        );
      },
    )
    .option("--top <n>", "heaviest keys to list (JSON)", positiveInt("--top"), 10)
    .option("--cost <field>", "the field with an operation's cost (bytes, rows, ms); absent: 1", "cost")
    .option("--op <field>", 'the field with "read" or "write"; absent: read', "op")
    .option("--entity <field>", "the field naming the row an operation is about: measures key stability")
    .option("--json", "print one JSON document on stdout")
    .addHelpText(
      "after",
      `
A candidate's field may hold one key value or a list: the first is the operation's key, the others
keys it also touches (a transfer's two accounts). Missing or null: the operation carries no key
and fans out.`,
    )
    .action(async (file: string, options) => {
      const o = options as {
        key: string[];
        members: number | number[];
        top: number;
        cost: string;
        op: string;
        entity?: string;
        json?: boolean;
      };
      await execute<typeof o, AnalyzeReport>("analyze", async () => {
        const { analyze, renderAnalyze } = await import("./analyze.js");
        const report = await analyze({
          file,
          keys: o.key,
          members: o.members,
          top: o.top,
          cost: o.cost,
          op: o.op,
          ...(o.entity !== undefined ? { entity: o.entity } : {}),
          ...(file === "-" ? { stdin: await (io.stdin ?? readStdin)() } : {}),
          ...(io.cwd ? { cwd: io.cwd } : {}),
        });
        return [report, renderAnalyze];
      })(o);
    });

  common(program.command("doctor"))
    .description("duplicate databases, connection budget, wal_level and schema drift between databases")
    .option("--timeout <ms>", "how long each database may take to answer", positiveInt("--timeout"), 5000)
    .option(
      "--instances <n>",
      "service instances opening the configured pools (budget = pools x n)",
      positiveInt("--instances"),
      1,
    )
    .option("--strict", "warnings (wal_level not logical) count as problems")
    .addOption(leaseOption())
    .addHelpText("after", "\nExit code 1 when a check fails (with --strict: also on warnings).")
    .action(
      execute<
        { config?: string; timeout: number; instances: number; strict?: boolean; lease: number },
        DoctorReport
      >("doctor", async (o) => {
        const { doctor, renderDoctor } = await import("./doctor.js");
        const report = await doctor({
          ...config(o),
          timeoutMs: o.timeout,
          instances: o.instances,
          strict: o.strict ?? false,
          leaseMs: o.lease,
        });
        return [report, renderDoctor];
      }),
    );

  addDashboardCommand({ program, io, execute, common, config });
}
