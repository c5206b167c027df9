// Starting a service: its settings from the environment (an error naming the variable, never a
// silent default), then listening until SIGINT or SIGTERM, when it closes what it opened.
import type { FastifyInstance } from "fastify";
import { MIN_SECRET_LENGTH } from "./auth.js";

/** Stops the start: `<service> service: bad environment:` and each problem on a line of its own. */
export function badEnvironment(service: string, problems: readonly string[]): Error {
  return new Error(`${service} service: bad environment:\n  - ${problems.join("\n  - ")}`);
}

/** The secret credentials are signed with, from `variable`: required, at least 32 characters. */
export function authSecret(service: string, variable: string, env = process.env): string {
  const secret = env[variable] ?? "";
  if (secret.length < MIN_SECRET_LENGTH)
    throw badEnvironment(service, [
      `${variable}: required, at least ${MIN_SECRET_LENGTH} characters (the secret credentials are signed with)`,
    ]);
  return secret;
}

/** PORT: the port to listen on (default 3000; 0 picks a free one). */
export function portOf(service: string, env = process.env): number {
  const port = Number(env.PORT ?? 3000);
  if (!(Number.isInteger(port) && port >= 0 && port <= 65_535))
    throw badEnvironment(service, [`PORT: must be a port number (0 picks a free one), got ${env.PORT}`]);
  return port;
}

/** What an outbox relay's `onError` reports: a database it could not read, and its shards. */
export function logRelayError(error: unknown, database: string, shards: string): void {
  console.error(`relay: ${database} (shards ${shards || "none"}) unavailable: ${(error as Error).message}`);
}

/**
 * Listens on 127.0.0.1:`port`, says where on stderr (with `describe`, the shards), and on SIGINT or
 * SIGTERM closes the app, then each of `close` in order, and exits.
 */
export async function serve(
  app: FastifyInstance,
  options: { service: string; port: number; describe: string; close: (() => Promise<void>)[] },
): Promise<void> {
  const address = await app.listen({ port: options.port, host: "127.0.0.1" });
  console.error(`${options.service} service on ${address} (${options.describe})`);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, async () => {
      await app.close();
      for (const close of options.close) await close();
      process.exit(0);
    });
  }
}
