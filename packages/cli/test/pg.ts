// A connection of a test's own to one database, for one piece of work: opened, used, closed (also
// when the work throws), so no test leaves a connection behind on a database it drops.
import pg from "pg";

/** `fn` with a connection of its own to `url`, closed after. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The rows of one statement on `url`, on a connection of its own. */
export function sql<T = Record<string, unknown>>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  return withClient(url, async (client) => (await client.query(text, values)).rows as T[]);
}
