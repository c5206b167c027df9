import { PrismaPg } from "@prisma/adapter-pg";
import { inject } from "vitest";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { PrismaClient } from "./generated/prisma/client.js";
import { models, S, worldPlacement } from "./layout.js";

export { models, S };

export type Db = "a" | "b" | "c";

/** A PrismaClient on one test database that records every SQL statement it sends. */
export function loggedClient(db: Db, url: string, log: { db: Db; sql: string }[]) {
  const client = new PrismaClient({
    adapter: new PrismaPg({ connectionString: url }),
    log: [{ emit: "event", level: "query" }],
  });
  client.$on("query", (event) => log.push({ db, sql: event.query }));
  return client;
}

/**
 * Six logical shards in two groups on three physical databases:
 *   a (server 1): 0/0, 0/1    b (server 1): 0/2, 1/0    c (server 2): 1/1, 1/2
 */
export function makeWorld() {
  const urls = inject("shardUrls");
  const log: { db: Db; sql: string }[] = [];
  const clients = {
    a: loggedClient("a", urls.a, log),
    b: loggedClient("b", urls.b, log),
    c: loggedClient("c", urls.c, log),
  };
  const registry = createShardRegistry({
    shards: worldPlacement(clients.a, clients.b, clients.c),
    defaultShard: S.g0m0,
  });
  const db = clients.a.$extends(shardRouting({ registry, models }));
  return {
    db,
    registry,
    clients,
    log,
    /** Databases that ran a statement on `table` since the last `clear()`, in order, deduplicated. */
    landed(table: string): Db[] {
      const seen: Db[] = [];
      for (const entry of log) {
        if (entry.sql.includes(`"${table}"`) && !seen.includes(entry.db)) seen.push(entry.db);
      }
      return seen.sort();
    },
    clear() {
      log.length = 0;
    },
    async truncate() {
      for (const client of Object.values(clients)) {
        await client.$executeRawUnsafe(
          'TRUNCATE "OrderItem", "Order", "Wallet", "Customer", "Setting", "OutboxEvent", "ProcessedEvent", "IdempotencyKey", "UniqueClaim", "UniqueClaimToken" RESTART IDENTITY',
        );
      }
      log.length = 0;
    },
    close: () => registry.disconnect(),
  };
}
