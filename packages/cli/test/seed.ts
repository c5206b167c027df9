// Rows for move tests: wallets and outbox events on given shards of a database.
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import pg from "pg";

export async function seed(url: string, shards: Record<string, number>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
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
  } finally {
    await client.end();
  }
}

/** Rows per shard key of a table (by the shard bits of its id). */
export async function rowsPerShard(url: string, table = "Wallet"): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT (((get_byte(uuid_send(id), 8) & 63) << 8) | get_byte(uuid_send(id), 9)) AS bits, count(*)::int AS n FROM "${table}" GROUP BY 1 ORDER BY 1`,
    );
    return Object.fromEntries(rows.map((r) => [ShardIdentifier.fromBits(r.bits).key, r.n]));
  } finally {
    await client.end();
  }
}
