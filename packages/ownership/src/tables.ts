import type { Database, ShardClient } from "@shardkit/prisma";
import { SHARDKIT_TABLES as OWN_TABLES } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { raw } from "./raw.js";
import { type FencedTable, tableIssues } from "./sql.js";

/**
 * The tables of `@shardkit/prisma`'s schema that hold shard rows, declared there: a partition map
 * and a move include those a database has without being told.
 */
export const SHARDKIT_TABLES: readonly FencedTable[] = OWN_TABLES;

const kindOf = (t: FencedTable) => t.kind ?? "uuid";
const describe = (t: FencedTable) => `${t.column}${kindOf(t) === "bits" ? " (bits)" : ""}`;

/** Whether `name` is one of shardkit's own tables; the entry when it is. */
export function shardkitTable(name: string): FencedTable | undefined {
  return SHARDKIT_TABLES.find((t) => t.table === name);
}

/**
 * What is wrong with the tables a caller lists (`tables` of a map or a check), before any database
 * is read: their shape, a table listed twice with different columns, and one of shardkit's tables
 * listed with another column than the one its rows name their shard by.
 */
export function listedTableIssues(tables: readonly FencedTable[] | undefined): string[] {
  const issues = tableIssues(tables);
  if (issues.length > 0) return issues;
  const seen = new Map<string, FencedTable>();
  tables!.forEach((t, i) => {
    const before = seen.get(t.table);
    if (before && (before.column !== t.column || kindOf(before) !== kindOf(t)))
      issues.push(`tables[${i}]: ${t.table} is listed twice, by ${describe(before)} and by ${describe(t)}`);
    seen.set(t.table, before ?? t);
    const own = shardkitTable(t.table);
    if (own && (own.column !== t.column || kindOf(own) !== kindOf(t)))
      issues.push(
        `tables[${i}]: ${t.table} is @shardkit/prisma's table, whose rows name their shard by ${describe(own)}, not ${describe(t)} (shardkit includes it by itself: leave it out)`,
      );
  });
  return issues;
}

/** The SQL that answers which of `$1`'s tables exist, as the rest of the package names them (unqualified, on the search path). */
const PRESENT_SQL = `SELECT name FROM unnest($1::text[]) AS name WHERE to_regclass(quote_ident(name)) IS NOT NULL`;

/** Which of shardkit's tables `database` has. */
export async function shardkitTablesAt<Client extends ShardClient>(
  database: Database<Client>,
): Promise<Set<string>> {
  const rows = await raw(database).$queryRawUnsafe<{ name: string }[]>(
    PRESENT_SQL,
    SHARDKIT_TABLES.map((t) => t.table),
  );
  return new Set(rows.map((r) => r.name));
}

/** What `resolveTables` decided. */
export interface ResolvedTables<Client extends ShardClient> {
  /** The caller's tables (each once, in their order), then shardkit's tables that every database answering has. */
  tables: FencedTable[];
  /** Shardkit's tables that some databases have and others do not, naming both. */
  issues: string[];
  /** Databases that did not answer: the decision was made without them. */
  unanswered: { physical: Database<Client>; error: string }[];
}

/**
 * The tables holding shard rows, by one rule for every caller (`PartitionMap.open`, `checkMove`; a
 * move carries its map's): the caller's own tables, plus each of `@shardkit/prisma`'s tables
 * (`SHARDKIT_TABLES`) that the databases have. Listing one of them too is allowed (it is counted
 * once). A shardkit table that some databases have and others do not is an issue naming them: the
 * shard's rows in it could not move with the shard, so it is never silently left out. The
 * databases are read at once, each bounded by `timeoutMs`; one that does not answer is left out of
 * the decision (`unanswered`), and a move's precheck reads its source and target again.
 */
export async function resolveTables<Client extends ShardClient>(
  databases: readonly Database<Client>[],
  listed: readonly FencedTable[],
  options: { timeoutMs: number },
): Promise<ResolvedTables<Client>> {
  const result = await scatter(databases, (database) => shardkitTablesAt(database), {
    policy: "partial",
    targetTimeoutMs: options.timeoutMs,
    key: (p) => p.name,
  });
  const present = new Map<Database<Client>, ReadonlySet<string>>();
  for (const outcome of result.outcomes) {
    if (outcome.status === "fulfilled") present.set(outcome.target, outcome.value);
  }
  const unanswered = result.missing.map((m) => ({
    physical: m.target,
    error: m.error instanceof Error ? m.error.message : String(m.error ?? m.reason),
  }));
  return { ...tablesFrom(present, listed), unanswered };
}

/**
 * `resolveTables`' rule on what the databases answered: `listed`, then each of shardkit's tables
 * that every database of `present` has (one that some have and others lack is an issue).
 */
export function tablesFrom<Client extends ShardClient>(
  present: ReadonlyMap<Database<Client>, ReadonlySet<string>>,
  listed: readonly FencedTable[],
): { tables: FencedTable[]; issues: string[] } {
  const tables: FencedTable[] = [];
  for (const t of listed) if (!tables.some((u) => u.table === t.table)) tables.push(t);
  const issues: string[] = [];
  for (const own of SHARDKIT_TABLES) {
    if (tables.some((t) => t.table === own.table)) continue;
    const having = [...present].filter(([, names]) => names.has(own.table)).map(([p]) => p.name);
    const lacking = [...present].filter(([, names]) => !names.has(own.table)).map(([p]) => p.name);
    if (having.length === 0) continue;
    if (lacking.length === 0) tables.push({ ...own });
    else
      issues.push(
        `${own.table}: ${having.join(", ")} ${having.length === 1 ? "has" : "have"} it and ${lacking.join(", ")} ${lacking.length === 1 ? "does" : "do"} not; its rows could not move with their shards (roll the same schema out to every database)`,
      );
  }
  return { tables, issues };
}
