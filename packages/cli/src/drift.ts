// Schema drift between databases: each database's schema as a set of (kind, name) -> definition,
// read from the catalog, compared against the schema most databases share.

/** One object of a database's schema. */
export interface SchemaObject {
  kind: "table" | "column" | "index" | "constraint" | "enum" | "migration";
  name: string;
  /** Its definition: a column's type, nullability and default; an index's or constraint's definition. */
  detail: string;
}

/**
 * Tables, columns (type, nullability, default), indexes, constraints and enums of the current
 * schema. Triggers and functions are left out on purpose: the partition map's fence gives each
 * database its own triggers, by design.
 */
export const FINGERPRINT_SQL = `SELECT kind, name, detail FROM (
  SELECT 'table' AS kind, c.relname::text AS name, ''::text AS detail
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
  UNION ALL
  SELECT 'column', c.relname::text || '.' || a.attname::text,
         format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'index', t.relname::text || '.' || i.relname::text, pg_get_indexdef(i.oid)
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = current_schema() AND t.relkind IN ('r', 'p')
  UNION ALL
  SELECT 'constraint', t.relname::text || '.' || con.conname::text, pg_get_constraintdef(con.oid)
    FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = current_schema()
  UNION ALL
  SELECT 'enum', t.typname::text, string_agg(e.enumlabel::text, ', ' ORDER BY e.enumsortorder)
    FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = current_schema() GROUP BY t.typname
) objects ORDER BY kind, name`;

/** Migrations applied (by `prisma migrate` or `shardkit rollout --migrations`), when the table exists. */
export const MIGRATIONS_SQL = `SELECT 'migration' AS kind, migration_name AS name, ''::text AS detail
  FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`;
export const HAS_MIGRATIONS_SQL = `SELECT to_regclass(quote_ident('_prisma_migrations')) IS NOT NULL AS present`;

/** How one database differs from the reference schema. */
export interface SchemaDifference {
  database: string;
  /** In the reference, not in this database. */
  missing: string[];
  /** In this database, not in the reference. */
  extra: string[];
  /** In both, defined differently: `name: here <> reference`. */
  changed: string[];
}

export interface DriftReport {
  /** The databases that share the reference schema (the one most databases have). */
  reference: string[];
  differences: SchemaDifference[];
}

const label = (o: SchemaObject) => `${o.kind} ${o.name}`;

/**
 * Compares the databases' schemas: the reference is the schema the most databases share (a tie goes
 * to the one the configuration lists first), and each other database's differences are listed.
 */
export function compareSchemas(
  schemas: readonly { database: string; objects: SchemaObject[] }[],
): DriftReport {
  const keyed = schemas.map((s) => ({
    database: s.database,
    map: new Map(s.objects.map((o) => [label(o), o.detail])),
    text: s.objects.map((o) => `${label(o)}=${o.detail}`).join("\n"),
  }));
  const groups = new Map<string, string[]>();
  for (const k of keyed) groups.set(k.text, [...(groups.get(k.text) ?? []), k.database]);
  let reference: string[] = [];
  let referenceText = "";
  for (const [text, databases] of groups) {
    if (databases.length > reference.length) {
      reference = databases;
      referenceText = text;
    }
  }
  const ref = keyed.find((k) => k.text === referenceText)?.map ?? new Map<string, string>();
  const differences: SchemaDifference[] = [];
  for (const k of keyed) {
    if (k.text === referenceText) continue;
    const missing = collapse([...ref.keys()].filter((name) => !k.map.has(name)));
    const extra = collapse([...k.map.keys()].filter((name) => !ref.has(name)));
    const changed = [...ref.entries()]
      .filter(([name, detail]) => k.map.has(name) && k.map.get(name) !== detail)
      .map(([name, detail]) => `${name}: ${k.map.get(name) || "(none)"} <> ${detail || "(none)"}`);
    differences.push({ database: k.database, missing, extra, changed });
  }
  return { reference, differences };
}

/** A missing (or extra) table stands for its columns, indexes and constraints: they are not listed apart. */
function collapse(labels: string[]): string[] {
  const tables = labels.filter((l) => l.startsWith("table ")).map((l) => l.slice("table ".length));
  return labels.filter((l) => {
    const [kind, ...rest] = l.split(" ");
    const name = rest.join(" ");
    return (
      kind === "table" ||
      kind === "enum" ||
      kind === "migration" ||
      !tables.some((t) => name.startsWith(`${t}.`))
    );
  });
}
