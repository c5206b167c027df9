// Rows for move tests: wallets and outbox events on given shards of a database, and the databases
// and configuration of a move test.
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { beforeAll } from "vitest";
import { configFile } from "./cli.js";
import { sql, withClient } from "./pg.js";

export function seed(url: string, shards: Record<string, number>): Promise<void> {
  return withClient(url, async (client) => {
    for (const [key, n] of Object.entries(shards)) {
      const shard = ShardIdentifier.parse(key);
      const ids = Array.from({ length: n }, () => ShardedUUID.generate(shard));
      await client.query(
        `INSERT INTO "Wallet" (id, owner, balance) SELECT id, 'owner-' || i, i FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, i)`,
        [ids],
      );
      await client.query(
        `INSERT INTO "OutboxEvent" (id, topic, "aggregateId", payload) SELECT id, 'wallet.opened', id, '{}' FROM unnest($1::uuid[]) AS t(id)`,
        [ids.slice(0, 3).map(() => ShardedUUID.generate(shard))],
      );
    }
  });
}

/** Rows per shard key of a table (by the shard bits of its id). */
export async function rowsPerShard(url: string, table = "Wallet"): Promise<Record<string, number>> {
  const rows = await sql<{ bits: number; n: number }>(
    url,
    `SELECT (((get_byte(uuid_send(id), 8) & 63) << 8) | get_byte(uuid_send(id), 9)) AS bits, count(*)::int AS n FROM "${table}" GROUP BY 1 ORDER BY 1`,
  );
  return Object.fromEntries(rows.map((r) => [ShardIdentifier.fromBits(r.bits).key, r.n]));
}

/**
 * A move test's databases, before its tests: a's holds shards 0/0 and 0/1 (their `rows` seeded) and
 * e's is a spare, named by a configuration file (`name`.json) whose path `use` receives.
 */
export function seededForMove(
  name: string,
  urls: { a: string; e: string },
  rows: Record<"0/0" | "0/1", number>,
  use: (config: string) => void,
): void {
  beforeAll(async () => {
    await seed(urls.a, rows);
    use(
      configFile(name, {
        shards: [
          { group: 0, member: 0, url: urls.a },
          { group: 0, member: 1, url: urls.a },
        ],
        databases: [{ url: urls.e }],
      }),
    );
  });
}
