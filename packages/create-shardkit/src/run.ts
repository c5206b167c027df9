import { Command, CommanderError } from "commander";
import pkg from "../package.json" with { type: "json" };
import { isShardkitError } from "./errors.js";
import { scaffold } from "./scaffold.js";
import { listTemplates } from "./templates.js";

/** The exit codes of `create-shardkit`. */
export const ExitCode = {
  /** The project is written (and installed). */
  OK: 0,
  /** `npm install` in the new project failed (its files are written), or something unexpected. */
  FAILED: 1,
  /** Usage errors (unknown template, a folder that is not empty, bad `--packages`): nothing was written. */
  USAGE: 2,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Where `run` writes: the process's streams by default. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  cwd?: string;
  /** Where `npm install` writes (default: the process's own streams). */
  installOutput?: "inherit" | "ignore";
}

/**
 * The `create-shardkit` command line (`npm create shardkit@latest <dir> -- --template <name>`): parses
 * `argv` (without `node` and the script), writes the project and resolves with the exit code (never
 * throws, never exits the process).
 */
export async function run(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let exitCode: number = ExitCode.OK;
  const templates = listTemplates();
  const program = new Command("create-shardkit")
    .description("Start a new service on sharded PostgreSQL from a shardkit template.")
    .version(pkg.version)
    .argument(
      "<dir>",
      "the project's folder (created; if it exists, it must be empty); its name names the package",
    )
    .requiredOption("-t, --template <name>", `the template: ${templates.map((t) => t.name).join(", ")}`)
    .option(
      "--packages <dir>",
      "install the @shardkit packages from the .tgz files in this folder (npm pack or pnpm pack output), for versions not released yet",
    )
    .option("--no-install", "write the project without running npm install in it")
    .showHelpAfterError("(create-shardkit --help for usage)")
    .exitOverride()
    .configureOutput({ writeOut: (s) => void io.stdout.write(s), writeErr: (s) => void io.stderr.write(s) })
    .addHelpText(
      "after",
      `
Templates:
${templates.map((t) => `  ${t.name.padEnd(12)} ${t.description}`).join("\n")}

Examples:
  npm create shardkit@latest my-service -- --template wallet
  npx create-shardkit my-service --template orders --no-install

Exit codes: 0 done; 1 npm install failed (the project is written); 2 usage errors (nothing written).`,
    )
    .action(async (dir: string, options: { template: string; packages?: string; install: boolean }) => {
      try {
        const result = await scaffold({
          dir,
          template: options.template,
          install: options.install,
          ...(options.packages !== undefined ? { packages: options.packages } : {}),
          ...(io.cwd !== undefined ? { cwd: io.cwd } : {}),
          ...(io.installOutput !== undefined ? { installOutput: io.installOutput } : {}),
        });
        const local = result.localPackages.map((p) => `${p.name}@${p.version}`).join(", ");
        io.stdout.write(
          [
            `Created ${result.name} from the ${result.template} template in ${result.dir}${result.installed ? ", installed" : ""}.`,
            ...(local ? [`From local tarballs: ${local}.`] : []),
            "",
            "Next:",
            ...result.nextSteps.map((step) => {
              const note = NOTES[step];
              const width = Math.max(...result.nextSteps.map((s) => s.length)) + 2;
              return note ? `  ${step.padEnd(width)}# ${note}` : `  ${step}`;
            }),
            "",
            "README.md says more: the API, the tests' PostgreSQL, the configuration.",
            "",
          ].join("\n"),
        );
      } catch (error) {
        exitCode = isShardkitError(error, "INSTALL_FAILED")
          ? ExitCode.FAILED
          : isShardkitError(error)
            ? ExitCode.USAGE
            : ExitCode.FAILED;
        io.stderr.write(`create-shardkit: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    });

  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
    io.stderr.write(`create-shardkit: ${error instanceof Error ? error.message : String(error)}\n`);
    return ExitCode.FAILED;
  }
  return exitCode;
}

const NOTES: Record<string, string> = {
  "npm install": "also generates the Prisma client",
  "npm test": "PostgreSQL on 127.0.0.1:5432 (README.md, Tests)",
  "npm run demo": "on embedded PGlite databases: nothing to set up",
  "npm start": "the API on PORT (default 3000); it needs its *_AUTH_SECRET (README.md, Credentials)",
};

function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() };
}
