// Warming clients at open: each client's engine started and one connection of its pool opened, a
// limited number at a time, so the first calls of a service do not each pay for a connection and
// an engine start (64 cold databases: seconds, one after another on a busy host).
import { scatter } from "@shardkit/scatter";

/** How many clients an open warms at once (as it asks its databases who they are: 16 at a time). */
export const WARM_CONCURRENCY = 16;

/** A client that can run one raw statement (every Prisma client can). */
interface Warmable {
  $queryRawUnsafe?(sql: string): Promise<unknown>;
}

/**
 * Runs `SELECT 1` through each of `clients`, `WARM_CONCURRENCY` at a time, each within `timeoutMs`:
 * its engine is started and its pool holds an open connection (until it idles `idleTimeoutMs`), so
 * the first call to it reuses that connection. A client that fails or is late is left cold (its
 * database answered the open's checks just before; its first call says what is wrong, if anything):
 * warming changes how soon a call runs, never what it answers. Resolves with the count of clients
 * warmed.
 */
export async function warmClients(clients: readonly unknown[], timeoutMs: number): Promise<number> {
  const warmable = [...new Set(clients)].filter(
    (c): c is Required<Warmable> => typeof (c as Warmable | null)?.$queryRawUnsafe === "function",
  );
  if (warmable.length === 0) return 0;
  const result = await scatter(warmable, (client) => client.$queryRawUnsafe("SELECT 1"), {
    policy: "partial",
    concurrency: WARM_CONCURRENCY,
    targetTimeoutMs: timeoutMs,
    abortable: false,
  });
  return result.outcomes.filter((o) => o.status === "fulfilled").length;
}
