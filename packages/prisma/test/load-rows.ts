// Load windows as the rows a router's flush sends (`FLUSH_LOAD`'s `$1`), for tests that write windows
// of their own making with the flush's statement, and the databases holding the load table they write to.
import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import { afterAll, beforeAll } from "vitest";
import type { ShardLoadWindow } from "../src/load/read.js";
import { CREATE_LOAD_TABLE } from "../src/load/schema.js";
import type { LoadRow } from "../src/load/sql.js";
import { PrismaClient } from "./generated/prisma/client.js";

/** `windows` as flush rows, stamped by the database's clock as given (no `sent_at`). */
export function loadRows(windows: readonly ShardLoadWindow[]): string {
  const rows: LoadRow[] = windows.map((w) => ({
    shard: w.shard.bits,
    window_start: w.windowStart.toISOString(),
    window_ms: w.windowMs,
    router: w.router,
    calls: w.calls,
    writes: w.writes,
    rows_written: w.rowsWritten,
    db_ms: w.dbMs,
    sketch: w.sketch,
    top: w.top,
    config: w.config,
  }));
  return JSON.stringify(rows);
}

/**
 * Databases of the test's own (`names`) holding the load table, made before the file's tests and
 * dropped after them, each with a Prisma client: `databases.urls` and `databases.clients` once made.
 */
export function loadTableDatabases(names: readonly string[]): { urls: string[]; clients: PrismaClient[] } {
  const databases = { urls: [] as string[], clients: [] as PrismaClient[] };
  beforeAll(async () => {
    databases.urls = await Promise.all(names.map((n) => createDatabase(MAIN_PORT, n)));
    databases.clients = databases.urls.map(
      (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) }),
    );
    for (const c of databases.clients) for (const ddl of CREATE_LOAD_TABLE) await c.$executeRawUnsafe(ddl);
  }, patient(60_000));
  afterAll(async () => {
    for (const c of databases.clients) await c.$disconnect();
    for (const n of names) await dropDatabase(MAIN_PORT, n);
  }, patient(60_000));
  return databases;
}
