import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRef, ShardRegistry } from "@shardkit/prisma";
import { toShard } from "@shardkit/prisma/internal";
import { primaryKeys } from "./changes.js";
import { OwnershipOptionsError } from "./errors.js";
import { liveIssues } from "./live-issues.js";
import type { ShardOwner } from "./owners.js";
import { poolerIssue } from "./pooler.js";
import { raw } from "./raw.js";
import { findMoves, isLive } from "./records.js";
import { type FencedTable, ownershipSchemaIssues, shardOfRowSql } from "./sql.js";
import {
  listedTableIssues,
  resolveTables,
  SHARDKIT_TABLES,
  shardkitTable,
  shardkitTablesAt,
} from "./tables.js";
import { readPartitionMap } from "./view.js";

/** How long a move and its check wait for each database to answer, by default. */
export const DEFAULT_ANSWER_MS = 10_000;

export interface MoveCheckOptions<Client extends ShardClient> {
  /** The registry of the databases (no `PartitionMap` needed: the check opens none). */
  registry: ShardRegistry<Client>;
  shard: ShardRef;
  /** The database that would own the shard. */
  to: Database<Client>;
  /** As `moveShard`'s: `live` (default) checks `wal_level` at the source too. */
  mode?: "live" | "offline";
  /**
   * The app's tables holding shard rows, as the move's map is opened with them. `@shardkit/prisma`'s
   * own tables are added as `PartitionMap.open` adds them (the same rule: `MoveCheck.tables`).
   */
  tables: readonly FencedTable[];
  /**
   * How long each database may take to answer (the map, the move records, the checks). A database
   * that takes longer is reported as not answering, never taken for one without records. Default
   * 10 000 ms, as a move's.
   */
  timeoutMs?: number;
  /**
   * Each database's libpq URL (as a live move's `sourceConnection` gives it). With it, a live check
   * also connects to the source and the target by these URLs and names one reached through a
   * connection pooler in transaction mode (PgBouncer), which a live move cannot use.
   */
  connection?: (database: Database<Client>) => string;
}

/** What `checkMove` found: where the shard is, and what would stop `moveShard` from starting. */
export interface MoveCheck<Client extends ShardClient = ShardClient> {
  shard: ShardIdentifier;
  /** The shard's owner now, by the records (the registry's assignment while it is unrecorded); null when unknown. */
  from: Database<Client> | null;
  to: Database<Client>;
  mode: "live" | "offline";
  /** The tables checked: the ones given, then `@shardkit/prisma`'s own that the databases have (as `PartitionMap.tables`). */
  tables: FencedTable[];
  /** Who owns the shard by the records, as `readPartitionMap` reads it. */
  owner: ShardOwner<Client>;
  /**
   * A move of the shard that stopped half-way (recorded on its source), which `moveShard` deals
   * with first: `finish` when it had switched (the target owns the shard: the old owner's side is
   * finished), `undo` otherwise (the target's copy is discarded; the check does not count it as a
   * leftover). `step` is what it had reached: `copying`, `fenced`, `switched` or `abandoned` (a router
   * gave its fenced shard back to its owner); `holder` the mover that held it. Null when there is
   * none, or when its lease is live (then `issues` says who holds it: the move would be refused).
   */
  resume: { target: string; step: string; holder: string; action: "finish" | "undo" } | null;
  /**
   * Every problem that would make `moveShard` refuse to start: a placement rule the target breaks
   * (`PlacementRuleError`), the precheck's (`MovePrecheckError` lists the same ones), records that
   * cannot be right, a database that did not answer. Empty: the move can start.
   */
  issues: string[];
}

/**
 * The checks a move runs before it changes anything (`moveShard`'s precheck, the same code), on
 * their own and without a `PartitionMap`: reads the map (`readPartitionMap`, SELECTs only) to find
 * the shard's owner, then checks that owner as the source against `to`. Nothing is changed: no
 * function installed, no record written. `OwnershipOptionsError` for options that cannot work,
 * or when `to` owns the shard already (as `moveShard`).
 * Longer than 80 lines: what a move would find, step by step in the move's own order.
 */
export async function checkMove<Client extends ShardClient>(
  options: MoveCheckOptions<Client>,
): Promise<MoveCheck<Client>> {
  const mode = options?.mode ?? "live";
  const issues = [
    ...(options?.registry && Array.isArray(options.registry.databases)
      ? moveOptionIssues(options.registry, options.to, mode)
      : ["registry: required"]),
    ...listedTableIssues(options?.tables),
  ];
  let shard: ShardIdentifier | undefined;
  if (options?.shard === undefined || options.shard === null) issues.push("shard: required");
  else {
    try {
      shard = toShard(options.shard);
    } catch (error) {
      issues.push(`shard ${JSON.stringify(options.shard)}: ${(error as Error).message}`);
    }
  }
  if (shard && typeof options.registry?.has === "function" && !options.registry.has(shard))
    issues.push(`shard ${shard.key} is not in the registry`);
  if (issues.length > 0 || !shard) throw new OwnershipOptionsError(issues);
  const { registry, to } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_ANSWER_MS;
  // Where the shard is, which tables hold its rows, and a move of it under way or stopped: read at once.
  const [view, resolved, moves] = await Promise.all([
    readPartitionMap(registry, { timeoutMs }),
    resolveTables(registry.databases, options.tables, { timeoutMs }),
    findMoves(registry, shard, timeoutMs),
  ]);
  const { tables } = resolved;
  const owner = view.ownerOf(shard);
  const from = owner.owner ?? (owner.state === "unrecorded" ? owner.configured : null);
  // The registry's placement rules: `moveShard` refuses a target the shard's group may not live on.
  const rule = registry.placement.allows(shard, to);
  const found = [
    ...(rule !== undefined ? [`${to.name} may not hold shard ${shard.key}: ${rule}`] : []),
    ...view.issues,
    ...resolved.issues,
  ];
  // A move whose lease is live: this one would be refused. One whose lease lapsed: `moveShard`
  // takes it over and finishes it (it switched) or undoes it (it did not) before anything else.
  const live = moves.found.find(isLive);
  if (live)
    found.push(
      `a move of shard ${shard.key} to ${view.nameOf(live.target)} is under way: ${live.holder} holds its lease (step ${live.step}; it lapses in ${(live.expiresInMs / 1000).toFixed(1)} s unless renewed)`,
    );
  const stopped = live ? undefined : moves.found[0];
  const stoppedTarget = stopped
    ? view.databases.find((d) => d.identity !== null && d.identity === stopped.target)?.physical
    : undefined;
  const resume: MoveCheck<Client>["resume"] = stopped
    ? {
        target: view.nameOf(stopped.target) ?? stopped.target,
        step: stopped.step,
        holder: stopped.holder,
        action: stoppedTarget !== undefined && from === stoppedTarget ? "finish" : "undo",
      }
    : null;
  if (stopped && stoppedTarget === undefined)
    found.push(
      `a stopped move of shard ${shard.key} names ${stopped.target}, which is not in the registry (or did not answer)`,
    );
  // Finishing a stopped move to `to` is all `moveShard` would do, and a move under way refuses it:
  // nothing else to check.
  if ((resume?.action === "finish" || live) && from === to)
    return { shard, from, to, mode, tables, owner, resume, issues: found };
  if (from === to) throw new OwnershipOptionsError([`${to.name} already owns shard ${shard.key}`]);
  if (from === null)
    found.push(
      `the owner of shard ${shard.key} is unknown: the databases holding its records did not answer`,
    );
  const silent = (physical: Database<Client>) =>
    view.databases.some((d) => d.physical === physical && d.status === "unavailable");
  for (const db of view.databases) {
    if (db.status === "unavailable" && (from === null || db.physical === from || db.physical === to))
      found.push(`${db.database}: did not answer (${db.error})`);
    if (db.status === "no-table" && (db.physical === from || db.physical === to))
      found.push(
        `${db.database}: has no ShardOwnership table (roll @shardkit/ownership's schema/ownership.prisma out to it)`,
      );
  }
  // The target's copy of a move under way, or of a stopped one `moveShard` undoes first, is no leftover.
  const liveTarget = live ? view.databases.find((d) => d.identity === live.target)?.physical : undefined;
  if (from !== null && !silent(from) && !silent(to))
    found.push(
      ...(await precheck(
        tables,
        shard,
        from,
        to,
        mode,
        (resume?.action === "undo" && stoppedTarget === to) || liveTarget === to,
      )),
    );
  const { connection } = options;
  if (mode === "live" && connection && from !== null) {
    const pooled = await Promise.all(
      [...new Set([from, to])].map((db) => poolerIssue(db.name, connection(db), timeoutMs)),
    );
    found.push(...pooled.filter((issue) => issue !== undefined));
  }
  return { shard, from, to, mode, tables, owner, resume, issues: found };
}

/** What is wrong with a move's `to` and `mode` (shared by `moveShard` and `checkMove`). */
export function moveOptionIssues<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  to: Database<Client> | undefined,
  mode: unknown,
): string[] {
  const issues: string[] = [];
  if (mode !== "live" && mode !== "offline")
    issues.push(`mode: expected 'live' or 'offline', got ${JSON.stringify(mode)}`);
  if (!to || !registry.databases.includes(to)) issues.push("to: not a database of the map's registry");
  return issues;
}

/**
 * Everything that must hold before a move of `shard` from `from` to `to` starts (`moveShard` runs
 * it, and `checkMove` on its own): every problem, nothing changed (it only reads).
 * Longer than 80 lines: every precondition checked, each problem named, before any change.
 */
export async function precheck<Client extends ShardClient>(
  tables: readonly FencedTable[],
  shard: ShardIdentifier,
  from: Database<Client>,
  to: Database<Client>,
  mode: "live" | "offline",
  /** The target's copy of the shard is a stopped move's, which `moveShard` discards before this check. */
  copyDiscarded = false,
): Promise<string[]> {
  const issues: string[] = [];
  // The lease, the records of this move and the keys it notes live in @shardkit/ownership's tables:
  // a database rolled out with an older schema lacks some of their columns.
  const [schemaAtSource, schemaAtTarget] = await Promise.all([
    ownershipSchemaIssues(raw(from), from.name),
    ownershipSchemaIssues(raw(to), to.name),
  ]);
  issues.push(...schemaAtSource, ...schemaAtTarget);
  // shardkit's own tables that either side has must move with the shard (a map opened while a
  // database did not answer decided its tables without that database).
  const [ownAtSource, ownAtTarget] = await Promise.all([shardkitTablesAt(from), shardkitTablesAt(to)]);
  for (const own of SHARDKIT_TABLES) {
    if (tables.some((t) => t.table === own.table)) continue;
    const at = [ownAtSource.has(own.table) ? from.name : null, ownAtTarget.has(own.table) ? to.name : null];
    const having = at.filter((n) => n !== null);
    if (having.length > 0)
      issues.push(
        `${own.table}: ${having.join(" and ")} ${having.length === 1 ? "has" : "have"} it, but it is not among the tables moved (reopen the map with every database answering)`,
      );
  }
  if (mode === "live") issues.push(...(await liveIssues(from, to)));
  const COLUMNS = `SELECT table_name AS "table", column_name AS "column", data_type AS type, is_nullable AS nullable,
      coalesce(column_default, '') AS "default", is_identity AS identity
    FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ANY($1::text[])
    ORDER BY table_name, ordinal_position`;
  const names = tables.map((t) => t.table);
  type Column = {
    table: string;
    column: string;
    type: string;
    nullable: string;
    default: string;
    identity: string;
  };
  const [source, target] = await Promise.all([
    raw(from).$queryRawUnsafe<Column[]>(COLUMNS, names),
    raw(to).$queryRawUnsafe<Column[]>(COLUMNS, names),
  ]);
  // The row checks below read only the tables that exist where they look.
  const atTarget: FencedTable[] = [];
  const onBoth: FencedTable[] = [];
  for (const table of tables) {
    const at = (list: Column[]) =>
      list
        .filter((c) => c.table === table.table)
        .map((c) => `${c.column} ${c.type}${c.nullable === "NO" ? " not null" : ""}`);
    const [a, b] = [at(source), at(target)];
    if (b.length > 0) atTarget.push(table);
    if (a.length > 0 && b.length > 0) onBoth.push(table);
    if (a.length === 0) issues.push(`${from.name}: table ${table.table} does not exist`);
    else if (b.length === 0)
      issues.push(`${to.name}: table ${table.table} does not exist (roll the schema out to it first)`);
    else if (a.join(", ") !== b.join(", "))
      issues.push(
        `${table.table}: the target's columns (${b.join(", ")}) differ from the source's (${a.join(", ")})`,
      );
    for (const c of source.filter((c) => c.table === table.table)) {
      if (c.identity === "YES" || c.default.startsWith("nextval(")) {
        issues.push(
          `${table.table}.${c.column}: takes its values from a sequence, and sequences do not move with a shard`,
        );
      }
    }
  }
  // A live move's row filter column must be in the replica identity, or every UPDATE and DELETE on
  // the source would fail. shardkit's own tables are given a full identity by the move itself. Its
  // check inside the fence looks up the rows written during the move by primary key.
  if (mode === "live") {
    const keys = await primaryKeys(raw(from), tables);
    for (const table of tables)
      if (!keys.has(table.table) && source.some((c) => c.table === table.table))
        issues.push(
          `${table.table}: has no primary key at ${from.name}; a live move looks up the rows written while it copies by their primary key`,
        );
    for (const table of await outsideIdentity(tables, from)) {
      if (shardkitTable(table.table)) continue;
      issues.push(
        `${table.table}: ${table.column} is not in its replica identity (its primary key); updates and deletes could not replicate`,
      );
    }
  }
  const leftovers = copyDiscarded ? 0 : await countAt(atTarget, to, shard);
  if (leftovers > 0)
    issues.push(
      `${to.name}: already holds ${leftovers} rows of shard ${shard.key} (a leftover copy: remove it first)`,
    );
  // Unique values of the shard's rows that a row of another shard at the target already holds (the
  // shard's own rows there are a leftover copy, reported above).
  for (const table of onBoth) {
    const uniques = await raw(from).$queryRawUnsafe<{ columns: string[] }[]>(
      `SELECT array_agg(a.attname::text ORDER BY k.ord) AS columns
       FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
       WHERE i.indrelid = to_regclass(quote_ident($1)) AND i.indisunique
       GROUP BY i.indexrelid, i.indisprimary
       HAVING NOT i.indisprimary OR NOT ($2 = ANY(array_agg(a.attname::text)))`,
      table.table,
      table.column,
    );
    for (const { columns } of uniques) {
      const list = columns.map((c) => `"${c}"`).join(", ");
      const values = await raw(from).$queryRawUnsafe<{ v: string }[]>(
        `SELECT json_agg(json_build_array(${list}))::text AS v FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1`,
        shard.bits,
      );
      const json = values[0]?.v;
      if (!json) continue;
      const [clash] = await raw(to).$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM "${table.table}" t, json_array_elements($1::json) v
         WHERE ${columns.map((c, i) => `t."${c}"::text = v->>${i}`).join(" AND ")}
           AND ${shardOfRowSql(table, "t")} <> $2`,
        json,
        shard.bits,
      );
      if (clash!.n > 0)
        issues.push(
          `${table.table} (${columns.join(", ")}): ${clash!.n} of the shard's values already exist at ${to.name}`,
        );
    }
  }
  return issues;
}

/**
 * The tables of `tables` whose shard column is not in their replica identity at `database` (its
 * primary key, or the index it names), and whose identity is not the full row.
 */
export async function outsideIdentity<Client extends ShardClient>(
  tables: readonly FencedTable[],
  database: Database<Client>,
): Promise<FencedTable[]> {
  const outside: FencedTable[] = [];
  for (const table of tables) {
    const [identity] = await raw(database).$queryRawUnsafe<{ replident: string; inkey: boolean }[]>(
      `SELECT c.relreplident::text AS replident,
         coalesce(bool_or(a.attname = $2), false) AS inkey
       FROM pg_class c
       LEFT JOIN pg_index i ON i.indrelid = c.oid AND (CASE WHEN c.relreplident = 'i' THEN i.indisreplident ELSE i.indisprimary END)
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
       WHERE c.oid = to_regclass(quote_ident($1)) GROUP BY c.relreplident`,
      table.table,
      table.column,
    );
    if (identity && identity.replident !== "f" && !identity.inkey) outside.push(table);
  }
  return outside;
}

/** Rows of `shard` that `database` holds, over every table. */
export async function countAt<Client extends ShardClient>(
  tables: readonly FencedTable[],
  database: Database<Client>,
  shard: ShardIdentifier,
) {
  let total = 0;
  for (const table of tables) {
    const [row] = await raw(database).$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1`,
      shard.bits,
    );
    total += row!.n;
  }
  return total;
}
