import { LOCKS, shardBitsSql } from "@shardkit/prisma/internal";

/** The SQLSTATE a fenced database raises for a write to a shard it does not own. */
export const STALE_OWNER_SQLSTATE = "SK001";

/** A table holding shard rows, and how a row names its shard. */
export interface FencedTable {
  /** The table's name in the database (a model's `@@map` name, or the model name). */
  table: string;
  /** The column that names the row's shard: a ShardedUUID (`id`), or the shard bits as an integer (`shard`). */
  column: string;
  /** `uuid` (default): `column` holds a ShardedUUID; `bits`: it holds `group << 6 | member`. */
  kind?: "uuid" | "bits";
}

/** What is wrong with a list of tables holding shard rows (`tables` of the map, of a move, of a check); empty when nothing. */
export function tableIssues(tables: readonly FencedTable[] | undefined): string[] {
  const issues: string[] = [];
  if (!Array.isArray(tables) || tables.length === 0) {
    issues.push("tables: at least one table holding shard rows is required");
    return issues;
  }
  tables.forEach((t, i) => {
    if (!t || typeof t.table !== "string" || t.table === "") issues.push(`tables[${i}].table: required`);
    if (!t || typeof t.column !== "string" || t.column === "") issues.push(`tables[${i}].column: required`);
    if (t?.kind !== undefined && t.kind !== "uuid" && t.kind !== "bits") {
      issues.push(`tables[${i}].kind: expected 'uuid' or 'bits', got ${JSON.stringify(t.kind)}`);
    }
  });
  return issues;
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * What a refusal says about the move holding a fenced shard, read from the refusing database's
 * `ShardMove` (its lease): a router refused by a fence whose mover's lease has lapsed gives the
 * shard back to its owner (`PartitionMap`'s heal), so a mover that died never leaves a shard
 * without a writer for longer than its lease.
 */
const MOVE_OF_FENCE = `IF seen = 'fenced' THEN
    SELECT m.step, m.holder, m.attempt, m."expiresAt" < clock_timestamp()
      INTO move_step, move_holder, move_attempt, move_lapsed
      FROM "ShardMove" m WHERE m.shard = bits;
  END IF;`;

/** The variables of a function that refuses with `MOVE_OF_FENCE` and `REFUSAL_DETAIL`: the shard's record, its state as seen, the move holding a fence. */
const REFUSAL_VARIABLES = `o record;
  seen text;
  move_step text;
  move_holder text;
  move_attempt text;
  move_lapsed boolean;`;

/** The DETAIL of a refusal (SK001): the database's record of the shard, and the move holding a fence. */
const REFUSAL_DETAIL = `json_build_object('shard', bits, 'epoch', coalesce(o.epoch, 0),
      'state', coalesce(seen, 'unknown'), 'peer', o.peer, 'attempt', o.attempt,
      'move', CASE WHEN move_step IS NULL THEN NULL ELSE json_build_object('step', move_step,
        'holder', move_holder, 'attempt', move_attempt, 'lapsed', move_lapsed) END)::text`;

/**
 * The function every fence trigger calls, for a write to a row of a shard its trigger lists (a
 * shard this database does not simply own: fenced, moved away, incoming, or armed for a move). It
 * queues behind any change of owner of the shard in progress (a shared advisory lock, first come
 * first served), then reads the database's record of the shard under a share lock. Owned: the
 * write goes on, holding that share lock, so a fence waits for it to commit; when the shard is
 * armed for a move (owned, with a peer), the row's primary key is noted in `ShardMoveChange`, so
 * the move verifies only these rows again inside its fence. Anything else: SK001 with the record
 * (epoch, state, new owner, attempt, and the move holding a fence) as JSON in DETAIL, which routers
 * read to refresh and retry.
 *
 * A writer under REPEATABLE READ or SERIALIZABLE whose snapshot predates the record's last change
 * cannot lock it (40001): that writer is refused too, with state `changed` (the record it sees is
 * not the current one; the router's refresh reads that).
 *
 * Arguments: the shard column, its kind (`uuid`, `bits`), the listed shards (for `fenceArguments`),
 * the primary key's columns as a JSON array (empty: the table's changes are not noted).
 */
export const REFUSE_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_refuse_write() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  touched jsonb[] := CASE TG_OP WHEN 'INSERT' THEN ARRAY[to_jsonb(NEW)] WHEN 'DELETE' THEN ARRAY[to_jsonb(OLD)]
                    ELSE ARRAY[to_jsonb(OLD), to_jsonb(NEW)] END;
  listed int[] := string_to_array(TG_ARGV[2], ',')::int[];
  r jsonb;
  v text;
  bits int;
  ${REFUSAL_VARIABLES}
BEGIN
  -- Each row the write touches (an UPDATE's old and new row: one that moves a row into a listed
  -- shard is checked too) whose shard is listed.
  FOREACH r IN ARRAY touched LOOP
    v := r ->> TG_ARGV[0];
    CONTINUE WHEN v IS NULL;
    IF TG_ARGV[1] = 'bits' THEN
      bits := v::int;
    ELSE
      bits := ((get_byte(uuid_send(v::uuid), 8) & 63) << 8) | get_byte(uuid_send(v::uuid), 9);
    END IF;
    CONTINUE WHEN NOT (bits = ANY(listed));
    PERFORM pg_advisory_xact_lock_shared(${LOCKS.shardWriters}, bits);
    IF current_setting('transaction_isolation') = 'read committed' THEN
      SELECT epoch, state, peer, attempt INTO o FROM "ShardOwnership" WHERE shard = bits FOR SHARE;
      seen := o.state;
    ELSE
      BEGIN
        SELECT epoch, state, peer, attempt INTO o FROM "ShardOwnership" WHERE shard = bits FOR SHARE;
        seen := o.state;
      EXCEPTION WHEN serialization_failure THEN
        SELECT epoch, state, peer, attempt INTO o FROM "ShardOwnership" WHERE shard = bits;
        seen := 'changed';
      END;
    END IF;
    IF seen IS DISTINCT FROM 'owned' THEN
      ${MOVE_OF_FENCE}
      RAISE EXCEPTION USING ERRCODE = '${STALE_OWNER_SQLSTATE}',
        MESSAGE = format('shardkit: this database does not own shard %s/%s (%s at epoch %s)',
                         bits >> 6, bits & 63, coalesce(seen, 'unknown'), coalesce(o.epoch, 0)),
        DETAIL = ${REFUSAL_DETAIL};
    END IF;
    IF o.peer IS NOT NULL AND TG_ARGV[3] <> '[]' THEN
      -- Armed for a move: the row's primary key, for the move's check inside its fence.
      INSERT INTO "ShardMoveChange" (shard, "table", key)
        SELECT bits, TG_TABLE_NAME,
          (SELECT jsonb_agg(r -> pk.c ORDER BY pk.n)
             FROM jsonb_array_elements_text(TG_ARGV[3]::jsonb) WITH ORDINALITY AS pk(c, n))::text
        ON CONFLICT DO NOTHING;
    END IF;
  END LOOP;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$fn$`;

/**
 * The function of a listing table's TRUNCATE trigger: a TRUNCATE fires no row trigger, so it would
 * neither be refused by the fence nor noted for a move's check. While a move is under way on this
 * database (a shard armed, fenced or incoming) it is refused (SQLSTATE SK002); otherwise it goes on.
 */
export const TRUNCATE_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_refuse_truncate() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  moving int;
BEGIN
  SELECT shard INTO moving FROM "ShardOwnership"
    WHERE (state = 'owned' AND peer IS NOT NULL) OR state IN ('fenced', 'incoming') LIMIT 1;
  IF moving IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'SK002',
      MESSAGE = format('shardkit: TRUNCATE of %s refused while shard %s/%s is being moved (a move checks and copies its rows row by row)',
                       TG_TABLE_NAME, moving >> 6, moving & 63);
  END IF;
  RETURN NULL;
END
$fn$`;

/**
 * What a shard transaction runs first when a partition map is attached, and what a router runs
 * after an answer that found nothing (a former owner must not answer "not found" for a shard it
 * lost): the database's record of the shard must say owned, at the epoch the router used;
 * otherwise SK001, as the fence raises it.
 */
export const ASSERT_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_assert_owner(bits int, expected int) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
  ${REFUSAL_VARIABLES}
BEGIN
  SELECT epoch, state, peer, attempt INTO o FROM "ShardOwnership" WHERE shard = bits;
  seen := o.state;
  IF seen IS DISTINCT FROM 'owned' OR o.epoch IS DISTINCT FROM expected THEN
    ${MOVE_OF_FENCE}
    RAISE EXCEPTION USING ERRCODE = '${STALE_OWNER_SQLSTATE}',
      MESSAGE = format('shardkit: this database does not own shard %s/%s at epoch %s (%s at epoch %s)',
                       bits >> 6, bits & 63, expected, coalesce(seen, 'unknown'), coalesce(o.epoch, 0)),
      DETAIL = ${REFUSAL_DETAIL};
  END IF;
  RETURN o.epoch;
END
$fn$`;

const TRIGGERS = [
  { suffix: "ins", event: "INSERT", rows: ["NEW"] },
  { suffix: "upd", event: "UPDATE", rows: ["OLD", "NEW"] },
  { suffix: "del", event: "DELETE", rows: ["OLD"] },
  { suffix: "trunc", event: "TRUNCATE", rows: [] },
] as const;

/** The names of a table's fence triggers. */
export const FENCE_TRIGGERS = TRIGGERS.map((t) => `shardkit_fence_${t.suffix}`);

/**
 * The arguments of `table`'s fence triggers for these shards (their bits), each followed by `|`, as
 * `FENCE_ARGUMENTS_SQL` reads them back: a fence whose arguments are these already is in line.
 */
export function fenceArguments(
  table: FencedTable,
  shards: readonly number[],
  key: readonly string[],
): string {
  return [table.column, table.kind ?? "uuid", listOf(shards), JSON.stringify(key)]
    .map((a) => `${a}|`)
    .join("");
}

/** Each fence trigger of this schema: its table, name and arguments (as `fenceArguments` writes them). */
export const FENCE_ARGUMENTS_SQL = `SELECT c.relname::text AS "table", t.tgname::text AS name,
    replace(encode(t.tgargs, 'escape'), '\\000', '|') AS args
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE t.tgname::text = ANY($1::text[]) AND c.relnamespace = current_schema()::regnamespace`;

const listOf = (shards: readonly number[]) => [...shards].sort((a, b) => a - b).join(",");

/**
 * The statements that make `table` check writes to the rows of `shards` (their bits) against the
 * database's record, or, with no shard, that remove its fence. The check exists only while a shard
 * of this database is armed for a move, fenced, moved away or incoming: a database with none pays
 * nothing.
 *
 * The condition is the trigger's WHEN, evaluated without calling the function, so writes to the
 * other shards of the database pay one expression per row. The mover's own session
 * (`SET shardkit.mover = 'on'`: copying, cleaning up) passes.
 *
 * Creating a trigger takes a SHARE ROW EXCLUSIVE lock: it waits for the writers already at work on
 * the table and holds off new ones until its transaction commits, and writers then see the
 * trigger whatever their isolation level. A shard listed already (armed) is fenced without this:
 * its record's change alone refuses later writes.
 */
export function fenceStatements(
  table: FencedTable,
  shards: readonly number[],
  key: readonly string[],
): string[] {
  if (shards.length === 0) {
    return FENCE_TRIGGERS.map((name) => `DROP TRIGGER IF EXISTS ${quote(name)} ON ${quote(table.table)}`);
  }
  const args = [table.column, table.kind ?? "uuid", listOf(shards), JSON.stringify(key)]
    .map(literal)
    .join(", ");
  const mover = "current_setting('shardkit.mover', true) IS DISTINCT FROM 'on'";
  return TRIGGERS.map((t) => {
    const name = quote(`shardkit_fence_${t.suffix}`);
    if (t.rows.length === 0)
      return `CREATE OR REPLACE TRIGGER ${name} BEFORE TRUNCATE ON ${quote(table.table)} FOR EACH STATEMENT
  EXECUTE FUNCTION shardkit_refuse_truncate(${args})`;
    const listed = t.rows
      .map((row) => `${shardOfRowSql(table, row)} IN (${[...shards].sort((a, b) => a - b).join(", ")})`)
      .join(" OR ");
    return `CREATE OR REPLACE TRIGGER ${name} BEFORE ${t.event} ON ${quote(table.table)} FOR EACH ROW
  WHEN ((${listed}) AND ${mover})
  EXECUTE FUNCTION shardkit_refuse_write(${args})`;
  });
}

/**
 * The SQL of a row's shard bits in `table`: its shard column read from `row` (`NEW`, `OLD`) or
 * unqualified, as the bits themselves or decoded from the ShardedUUID it holds.
 */
export function shardOfRowSql(table: FencedTable, row?: string): string {
  const column = row ? `${row}.${quote(table.column)}` : quote(table.column);
  return (table.kind ?? "uuid") === "bits" ? column : shardBitsSql(column);
}

/** A string as an SQL literal. */
export function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/**
 * What a router's idle check compares: a digest of every field of a database's records that routing
 * reads (not `updatedAt`), one row however many shards the database holds.
 */
export const RECORDS_DIGEST = `md5(coalesce(string_agg(shard || ':' || epoch || ':' || state || ':' || coalesce(peer, '') || ':' || coalesce(attempt, ''), ',' ORDER BY shard), ''))`;

/**
 * The router's read of a database's records, with, for a shard fenced or armed for a move, whether
 * that move's lease lapsed (its mover stopped before the switch), and the records' digest read in
 * the same statement (one snapshot: a change committed after the read changes the digest the idle
 * check finds). A database with no records gives one row of nulls with the digest.
 */
export const MAP_RECORDS_SQL = `WITH d AS (SELECT ${RECORDS_DIGEST} AS digest FROM "ShardOwnership")
  SELECT o.shard, o.epoch, o.state, o.peer, o.attempt,
    CASE WHEN o.state = 'fenced' OR (o.state = 'owned' AND o.peer IS NOT NULL) THEN
      (SELECT m."expiresAt" < clock_timestamp() AND m.step NOT IN ('switched', 'abandoned')
         FROM "ShardMove" m WHERE m.shard = o.shard AND m.attempt = o.attempt) END AS lapsed,
    d.digest
  FROM d LEFT JOIN "ShardOwnership" o ON true`;

/**
 * The map's version in a database: a sequence every change of records anywhere in the fleet moves
 * on in every database of it (`MAP_BUMP_SQL`, after the change has committed), so a router that
 * reads any one database's version learns that something changed. In shardkit's own schema, which
 * Prisma's push leaves alone.
 */
const MAP_VERSION = "shardkit.map_version";

/** Moves the map's version on (`MAP_VERSION`): one statement per database, after a change. */
export const MAP_BUMP_SQL = `SELECT nextval('${MAP_VERSION}')::text AS version`;

/**
 * A router's idle look at a database: the map's version (0 before any change was announced), then
 * the digest of its records (`RECORDS_DIGEST`), read in a snapshot taken after the version (each
 * statement of a function takes its own): a change announced by the version read is in the digest.
 */
export const CHECK_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_map_check() RETURNS TABLE (version text, digest text)
LANGUAGE plpgsql AS $fn$
BEGIN
  version := (SELECT CASE WHEN is_called THEN last_value ELSE 0 END::text FROM ${MAP_VERSION});
  digest := (SELECT ${RECORDS_DIGEST} FROM "ShardOwnership");
  RETURN NEXT;
END
$fn$`;

/** shardkit's functions, each with the statement that installs it (and what it needs made before). */
export const FUNCTIONS: readonly { name: string; create: string; before?: readonly string[] }[] = [
  { name: "shardkit_refuse_write", create: REFUSE_FUNCTION },
  { name: "shardkit_refuse_truncate", create: TRUNCATE_FUNCTION },
  { name: "shardkit_assert_owner", create: ASSERT_FUNCTION },
  {
    name: "shardkit_map_check",
    create: CHECK_FUNCTION,
    before: ["CREATE SCHEMA IF NOT EXISTS shardkit", `CREATE SEQUENCE IF NOT EXISTS ${MAP_VERSION}`],
  },
];

/** A function's body as PostgreSQL stores it (`pg_proc.prosrc`): what lies between its `$fn$` quotes. */
export function functionBody(create: string): string {
  return create.split("$fn$")[1] ?? "";
}

/** The body of each of shardkit's functions in the current schema, by name (none: not installed). */
export const FUNCTION_BODIES_SQL = `SELECT proname::text AS name, prosrc AS body FROM pg_proc
  WHERE pronamespace = current_schema()::regnamespace AND proname::text = ANY($1::text[])`;

/** Each of the tables `$1` (names) of the current schema that has a primary key: its columns in order and their types. */
export const PRIMARY_KEYS_SQL = `SELECT c.relname::text AS "table",
    array_agg(a.attname::text ORDER BY k.n) AS columns,
    array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY k.n) AS types
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
  CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
  WHERE i.indisprimary AND c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1::text[])
  GROUP BY c.relname`;

/**
 * The columns of @shardkit/ownership's tables each database must have (its schema,
 * `schema/ownership.prisma`): a database rolled out with an older version lacks some.
 */
export const OWNERSHIP_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  ShardOwnership: ["shard", "epoch", "state", "peer", "attempt", "verifiedBy", "updatedAt"],
  ShardMove: ["shard", "target", "step", "attempt", "token", "holder", "expiresAt", "startedAt", "updatedAt"],
  ShardMoveChange: ["shard", "table", "key"],
};

/** The columns of @shardkit/ownership's tables in the current schema. */
export const OWNERSHIP_COLUMNS_SQL = `SELECT table_name::text AS "table", column_name::text AS "column"
  FROM information_schema.columns
  WHERE table_schema = current_schema() AND table_name = ANY($1::text[])`;

/** What `db` lacks of @shardkit/ownership's schema (tables or columns), as issues; empty when nothing. */
export async function ownershipSchemaIssues(
  db: { $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T> },
  name: string,
): Promise<string[]> {
  const rows = await db.$queryRawUnsafe<{ table: string; column: string }[]>(
    OWNERSHIP_COLUMNS_SQL,
    Object.keys(OWNERSHIP_COLUMNS),
  );
  return schemaIssuesOf(rows, name);
}

/** What a database lacks of @shardkit/ownership's schema, from the columns it has of its tables (`OWNERSHIP_COLUMNS_SQL`). */
export function schemaIssuesOf(rows: readonly { table: string; column: string }[], name: string): string[] {
  const missing: string[] = [];
  for (const [table, columns] of Object.entries(OWNERSHIP_COLUMNS)) {
    const present = rows.filter((r) => r.table === table).map((r) => r.column);
    if (present.length === 0) missing.push(`table ${table}`);
    else for (const c of columns) if (!present.includes(c)) missing.push(`column ${table}.${c}`);
  }
  return missing.length === 0
    ? []
    : [
        `${name}: lacks ${missing.join(", ")} of @shardkit/ownership's schema (roll schema/ownership.prisma out to it)`,
      ];
}
