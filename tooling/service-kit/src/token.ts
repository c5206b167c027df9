// The `token` script of a service: prints a credential (`npm run token -- --<role> <subject>` or
// `npm run token -- --admin <name>`) signed with the service's secret, for trying the API by hand
// and for scripts. In production, issue tokens where you authenticate people, with the same secret.
import { parseArgs } from "node:util";
import type { PrincipalOf, Roles, ServiceAuth } from "./auth.js";

export interface TokenCommand<R extends Roles> {
  /** The environment variable holding the secret (WALLET_AUTH_SECRET). */
  secretVariable: string;
  /** The roles besides `admin` (auth.ts's), each a flag `--<role> <field>`. */
  roles: R;
  createAuth: (secret: string) => ServiceAuth<PrincipalOf<R>>;
}

/** Runs the script on `args` (default the process's): the token on stdout, or a usage error (exit code 2). */
export async function tokenCommand<R extends Roles>(
  command: TokenCommand<R>,
  args: string[] = process.argv.slice(2),
): Promise<void> {
  const roles = Object.keys(command.roles);
  const subjects: Record<string, { type: "string" }> = Object.fromEntries(
    ["admin", ...roles].map((role) => [role, { type: "string" }]),
  );
  const { values } = parseArgs({
    args,
    options: { ...subjects, expires: { type: "string", default: "1h" } },
  });
  const subjectOf = (role: string) => (values as Record<string, string | undefined>)[role];
  const secret = process.env[command.secretVariable];
  if (!secret) {
    console.error(`token: set ${command.secretVariable} (the secret the service checks tokens with)`);
    process.exit(2);
  }
  const given = ["admin", ...roles].filter((role) => subjectOf(role) !== undefined);
  if (given.length !== 1) {
    const flags = roles.map((role) => `--${role} <${command.roles[role]}>`);
    console.error(`token: give one of ${[...flags, "--admin <name>"].join(" or ")}`);
    process.exit(2);
  }
  const role = given[0]!;
  const field = role === "admin" ? "subject" : command.roles[role]!;
  const principal = { role, [field]: subjectOf(role) } as PrincipalOf<R>;
  const token = await command.createAuth(secret).issue(principal, String(values.expires));
  process.stdout.write(`${token}\n`);
}
