// What a database's schema was last rolled out from: after each successful rollout, a fingerprint
// of what was applied (the schema files or migrations, the mode, the engine's version) and a digest
// of what the database's schema then was, in a table of shardkit's own. An open reads them back
// with one statement and skips the schema engine where both still hold.
import { createHash } from "node:crypto";
import type { SqlDriverAdapter, SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";

/**
 * The table, in a PostgreSQL schema of its own: the engine only looks at the schema it pushes into
 * (`public` by default), so a push neither sees it nor offers to drop it, and the application's
 * schema holds only its own tables. One row per schema pushed into.
 */
export const FINGERPRINT_TABLE = 'shardkit."ShardkitSchema"';

/**
 * What a check found (`RolloutTargetReport.fingerprint`):
 * - `matched`: the fingerprint recorded is this rollout's and the database's schema is as it was
 *   then: the engine did not run;
 * - `absent`: nothing recorded (a new database, or the table was dropped);
 * - `changed`: recorded for other schema files, migrations, mode or engine version;
 * - `drifted`: recorded for this rollout, but the schema changed since (a table or column changed
 *   by hand, the schema dropped and made again);
 * - `unreadable`: the check failed (no right to read the table, ...): the engine ran.
 */
export type FingerprintState = "matched" | "absent" | "changed" | "drifted" | "unreadable";

/** The fingerprint of a rollout: a hash of its mode, the engine's version and what it applies. */
export function fingerprintOf(mode: "push" | "migrate", engine: string, parts: readonly string[]): string {
  const hash = createHash("sha256");
  // Lengths first, so that no two lists of parts hash alike by moving a boundary.
  for (const part of ["shardkit-schema/1", mode, engine, ...parts]) hash.update(`${part.length}:${part}`);
  return hash.digest("hex");
}

/**
 * A digest of the schema `$1` as PostgreSQL describes it: every column (type, nullability,
 * default), constraint, index and enum, by name. It changes when the schema does, and never
 * otherwise (no statistics, no object ids). Cheap: a few catalog rows per table.
 */
const CATALOG_DIGEST = `(SELECT md5(coalesce(string_agg(part, E'\\n' ORDER BY part COLLATE "C"), '')) FROM (
  SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
      || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
      || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') AS part
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
    WHERE n.nspname::text = $1::text AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  UNION ALL
  SELECT 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname::text = $1::text
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname::text = $1::text
  UNION ALL
  SELECT 'enum ' || t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
    FROM pg_type t
    JOIN pg_enum e ON e.enumtypid = t.oid
    JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname::text = $1::text
    GROUP BY t.typname
) AS parts)`;

const READ = `SELECT "fingerprint", "catalog" = ${CATALOG_DIGEST} AS "intact" FROM ${FINGERPRINT_TABLE} WHERE "schema" = $1::text`;

const CREATE = [
  "CREATE SCHEMA IF NOT EXISTS shardkit",
  `CREATE TABLE IF NOT EXISTS ${FINGERPRINT_TABLE} (
  "schema" text PRIMARY KEY,
  "fingerprint" text NOT NULL,
  "catalog" text NOT NULL,
  "mode" text NOT NULL,
  "engine" text NOT NULL,
  "recordedAt" timestamptz NOT NULL DEFAULT now()
)`,
];

const WRITE = `INSERT INTO ${FINGERPRINT_TABLE} ("schema", "fingerprint", "catalog", "mode", "engine", "recordedAt")
  SELECT $1::text, $2::text, ${CATALOG_DIGEST}, $3::text, $4::text, now()
  ON CONFLICT ("schema") DO UPDATE SET "fingerprint" = EXCLUDED."fingerprint", "catalog" = EXCLUDED."catalog",
    "mode" = EXCLUDED."mode", "engine" = EXCLUDED."engine", "recordedAt" = EXCLUDED."recordedAt"`;

const text = (n: number) =>
  Array.from({ length: n }, () => ({ scalarType: "string" as const, arity: "scalar" as const }));

/** The schema the engine pushes into through `connection`: the adapter's `schema` option, else `public`. */
function schemaOf(connection: SqlDriverAdapter): string {
  return connection.getConnectionInfo?.().schemaName ?? "public";
}

async function withConnection<T>(
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: (connection: SqlDriverAdapter) => Promise<T>,
): Promise<T> {
  const connection = await adapter.connect();
  try {
    return await fn(connection);
  } finally {
    await connection.dispose();
  }
}

/** What a check that could ask found. */
export type CheckedState = Exclude<FingerprintState, "unreadable">;

/** Compares what the database recorded with `fingerprint`, in one statement. Rejects when it cannot ask. */
export function checkFingerprint(
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fingerprint: string,
): Promise<CheckedState> {
  return withConnection(adapter, (connection) => checkFingerprintOn(connection, fingerprint));
}

/** `checkFingerprint` through a connection already open (an open asks it after its first question). */
export async function checkFingerprintOn(
  connection: SqlDriverAdapter,
  fingerprint: string,
): Promise<CheckedState> {
  const result = await connection
    .queryRaw({ sql: READ, args: [schemaOf(connection)], argTypes: text(1) })
    .catch((error: unknown) => {
      if (missingTable(error)) return undefined;
      throw error;
    });
  const row = result?.rows[0];
  if (!row) return "absent";
  const [recorded, intact] = row as [string, boolean | string];
  if (recorded !== fingerprint) return "changed";
  return intact === true || intact === "t" ? "matched" : "drifted";
}

/**
 * Records `fingerprint` with a digest of the database's schema as it is now, creating the table
 * when absent. Call it only after a rollout that succeeded: a fingerprint says "this was applied".
 * A rollout that changed the database and ended before this (a crash) records nothing, and the
 * next check runs the engine again, which is safe: a push or a migrate deploy applies only what is
 * missing. Two processes creating the table at once: the one that lost tries once more.
 */
export async function recordFingerprint(
  adapter: SqlMigrationAwareDriverAdapterFactory,
  record: { fingerprint: string; mode: "push" | "migrate"; engine: string },
): Promise<void> {
  await withConnection(adapter, async (connection) => {
    const write = async () => {
      for (const sql of CREATE) await connection.executeRaw({ sql, args: [], argTypes: [] });
      await connection.executeRaw({
        sql: WRITE,
        args: [schemaOf(connection), record.fingerprint, record.mode, record.engine],
        argTypes: text(4),
      });
    };
    await write().catch(write);
  });
}

/** PostgreSQL's "relation does not exist" (42P01): no table, or no `shardkit` schema at all. */
function missingTable(error: unknown): boolean {
  const e = error as { cause?: { kind?: unknown; originalCode?: unknown }; message?: unknown } | undefined;
  return (
    e?.cause?.kind === "TableDoesNotExist" ||
    e?.cause?.originalCode === "42P01" ||
    /relation "[^"]*ShardkitSchema" does not exist/.test(String(e?.message ?? ""))
  );
}
