import { shardBitsSql } from "@shardkit/prisma";

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

/** The advisory lock (with a shard's bits as its second key) that orders writers of an armed shard behind a change of owner. */
export const SHARD_LOCK = 7302;

/**
 * The function every fence trigger calls, for a write to a row of a shard its trigger lists (a
 * shard this database does not simply own: fenced, moved away, incoming, or armed for a move). It
 * queues behind any change of owner of the shard in progress (a shared advisory lock, first come
 * first served), then reads the database's record of the shard under a share lock. Owned: the
 * write goes on, holding that share lock, so a fence waits for it to commit. Anything else: SK001
 * with the record (epoch, state, new owner) as JSON in DETAIL, which routers read to refresh and
 * retry.
 *
 * A writer under REPEATABLE READ or SERIALIZABLE whose snapshot predates the record's last change
 * cannot lock it (40001): that writer is refused too, with state `changed` (the record it sees is
 * not the current one; the router's refresh reads that).
 */
export const REFUSE_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_refuse_write() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  v text := to_jsonb(CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END) ->> TG_ARGV[0];
  bits int;
  o record;
  seen text;
BEGIN
  IF TG_ARGV[1] = 'bits' THEN
    bits := v::int;
  ELSE
    bits := ((get_byte(uuid_send(v::uuid), 8) & 63) << 8) | get_byte(uuid_send(v::uuid), 9);
  END IF;
  PERFORM pg_advisory_xact_lock_shared(${SHARD_LOCK}, bits);
  IF current_setting('transaction_isolation') = 'read committed' THEN
    SELECT epoch, state, peer INTO o FROM "ShardOwnership" WHERE shard = bits FOR SHARE;
    seen := o.state;
  ELSE
    BEGIN
      SELECT epoch, state, peer INTO o FROM "ShardOwnership" WHERE shard = bits FOR SHARE;
      seen := o.state;
    EXCEPTION WHEN serialization_failure THEN
      SELECT epoch, state, peer INTO o FROM "ShardOwnership" WHERE shard = bits;
      seen := 'changed';
    END;
  END IF;
  IF seen = 'owned' THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '${STALE_OWNER_SQLSTATE}',
    MESSAGE = format('shardkit: this database does not own shard %s/%s (%s at epoch %s)',
                     bits >> 6, bits & 63, coalesce(seen, 'unknown'), coalesce(o.epoch, 0)),
    DETAIL = json_build_object('shard', bits, 'epoch', coalesce(o.epoch, 0),
                               'state', coalesce(seen, 'unknown'), 'peer', o.peer)::text;
END
$fn$`;

/**
 * What a shard transaction runs first when a partition map is attached: the database's record of
 * the shard must say owned, at the epoch the router used; otherwise SK001, as the fence raises it.
 */
export const ASSERT_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_assert_owner(bits int, expected int) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
  o record;
BEGIN
  SELECT epoch, state, peer INTO o FROM "ShardOwnership" WHERE shard = bits;
  IF o.state IS DISTINCT FROM 'owned' OR o.epoch IS DISTINCT FROM expected THEN
    RAISE EXCEPTION USING ERRCODE = '${STALE_OWNER_SQLSTATE}',
      MESSAGE = format('shardkit: this database does not own shard %s/%s at epoch %s (%s at epoch %s)',
                       bits >> 6, bits & 63, expected, coalesce(o.state, 'unknown'), coalesce(o.epoch, 0)),
      DETAIL = json_build_object('shard', bits, 'epoch', coalesce(o.epoch, 0),
                                 'state', coalesce(o.state, 'unknown'), 'peer', o.peer)::text;
  END IF;
  RETURN o.epoch;
END
$fn$`;

const TRIGGERS = [
  { suffix: "ins", event: "INSERT", row: "NEW" },
  { suffix: "upd", event: "UPDATE", row: "OLD" },
  { suffix: "del", event: "DELETE", row: "OLD" },
] as const;

/** The names of a table's fence triggers. */
export const FENCE_TRIGGERS = TRIGGERS.map((t) => `shardkit_fence_${t.suffix}`);

/**
 * The arguments of `table`'s fence triggers for these shards (their bits), each followed by `|`, as
 * `FENCE_ARGUMENTS_SQL` reads them back: a fence whose arguments are these already is in line.
 */
export function fenceArguments(table: FencedTable, shards: readonly number[]): string {
  return [table.column, table.kind ?? "uuid", listOf(shards)].map((a) => `${a}|`).join("");
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
export function fenceStatements(table: FencedTable, shards: readonly number[]): string[] {
  if (shards.length === 0) {
    return FENCE_TRIGGERS.map((name) => `DROP TRIGGER IF EXISTS ${quote(name)} ON ${quote(table.table)}`);
  }
  return TRIGGERS.map((t) => {
    const bits = shardOfRowSql(table, t.row);
    return `CREATE OR REPLACE TRIGGER ${quote(`shardkit_fence_${t.suffix}`)} BEFORE ${t.event} ON ${quote(table.table)} FOR EACH ROW
  WHEN (${bits} IN (${[...shards].sort((a, b) => a - b).join(", ")}) AND current_setting('shardkit.mover', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION shardkit_refuse_write(${literal(table.column)}, ${literal(table.kind ?? "uuid")}, ${literal(listOf(shards))})`;
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
 * The advisory lock (one key, of its own) that serialises installing shardkit's functions and
 * recording unrecorded shards in a database: service instances opening their maps at the same
 * moment would otherwise replace the same function at once, which PostgreSQL refuses ("tuple
 * concurrently updated"). Other keys in use: 7301 (changes of ownership), 7302 (a shard's writers,
 * two keys), 7303 (@shardkit/prisma's claims, two keys).
 */
export const INSTALL_LOCK = 7304;

/** shardkit's functions, each with the statement that installs it. */
export const FUNCTIONS = [
  { name: "shardkit_refuse_write", create: REFUSE_FUNCTION },
  { name: "shardkit_assert_owner", create: ASSERT_FUNCTION },
] as const;

/** A function's body as PostgreSQL stores it (`pg_proc.prosrc`): what lies between its `$fn$` quotes. */
export function functionBody(create: string): string {
  return create.split("$fn$")[1] ?? "";
}

/** The body of each of shardkit's functions in the current schema, by name (none: not installed). */
export const FUNCTION_BODIES_SQL = `SELECT proname::text AS name, prosrc AS body FROM pg_proc
  WHERE pronamespace = current_schema()::regnamespace AND proname::text = ANY($1::text[])`;
