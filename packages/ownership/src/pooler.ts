// Whether a database is reached through a connection pooler in transaction mode (PgBouncer,
// Supavisor): a live move cannot go through one (its subscription needs a replication connection to
// the server itself), so `checkMove` says so before anything starts. Told by behaviour, without any
// right on the pooler: two client connections open at once are each a server session of their own
// when connected directly, for as long as they are open; a transaction-mode pooler hands its server
// sessions from client to client between transactions, so two open clients meet one session, or one
// client moves from session to session.
import pg from "pg";

/** Statements each client sends (alternating), looking for a session shared or changed. */
const ROUNDS = 4;

/**
 * Why `url` cannot carry a live move's replication (it reaches a transaction-mode pooler), or that
 * this could not be told (a connection or statement that failed or did not answer within
 * `timeoutMs`: never a silent pass), naming `name`; undefined when it reaches the server directly.
 */
export async function poolerIssue(name: string, url: string, timeoutMs: number): Promise<string | undefined> {
  const clients = [0, 1].map(
    () =>
      new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: timeoutMs,
        query_timeout: timeoutMs,
        application_name: "shardkit check",
      }),
  );
  try {
    await Promise.all(clients.map((c) => c.connect()));
    const seen: number[][] = [[], []];
    for (let round = 0; round < ROUNDS; round++)
      for (const [i, client] of clients.entries()) {
        const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        seen[i]!.push(rows[0]!.pid);
      }
    const [a, b] = seen as [number[], number[]];
    const shared = a.find((pid) => b.includes(pid));
    const moved = [a, b].find((pids) => new Set(pids).size > 1);
    if (shared === undefined && moved === undefined) return undefined;
    const how =
      shared !== undefined
        ? `two client connections open at once were served by one server session (pid ${shared})`
        : `one client connection was served by server sessions ${[...new Set(moved)].join(", ")} in turn`;
    return `${name}: its URL reaches a connection pooler in transaction mode (PgBouncer or alike: ${how}); a live move needs a direct connection to the server (replication and subscriptions cannot go through a pooler): give the move the server's own URL, or use mode: 'offline'`;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return `${name}: could not tell whether its URL reaches a connection pooler in transaction mode (${why.split("\n")[0]}); a live move needs a direct connection to the server`;
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
}
