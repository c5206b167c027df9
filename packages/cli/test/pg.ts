// A connection of a test's own to one database, for one piece of work: `withClient` of the
// test helpers, and the rows of one statement through it.
import { withClient } from "@shardkit/test-db";

export { withClient };

/** The rows of one statement on `url`, on a connection of its own. */
export function sql<T = Record<string, unknown>>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  return withClient(url, async (client) => (await client.query(text, values)).rows as T[]);
}
