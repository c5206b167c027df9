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

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The function every fence trigger calls: it raises SK001 with the database's record of the shard
 * (epoch, state, new owner) as JSON in DETAIL, which routers read to refresh and retry. The record
 * comes with the trigger (its third argument, written when the fence changed), not from a query:
 * a writer under REPEATABLE READ would read the table as it was before the fence.
 */
export const REFUSE_FUNCTION = `CREATE OR REPLACE FUNCTION shardkit_refuse_write() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  v text := to_jsonb(CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END) ->> TG_ARGV[0];
  bits int;
  o jsonb;
BEGIN
  IF TG_ARGV[1] = 'bits' THEN
    bits := v::int;
  ELSE
    bits := ((get_byte(uuid_send(v::uuid), 8) & 63) << 8) | get_byte(uuid_send(v::uuid), 9);
  END IF;
  o := TG_ARGV[2]::jsonb -> bits::text;
  -- An incoming shard's fence lifts as soon as the switch has recorded it as owned here: the
  -- switch is then one row update, no DDL while writes wait. (A fenced or moved shard's fence never
  -- reads the table: a writer's snapshot may predate the fence.)
  IF o ->> 'state' = 'incoming' AND EXISTS (SELECT 1 FROM "ShardOwnership" WHERE shard = bits AND state = 'owned') THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '${STALE_OWNER_SQLSTATE}',
    MESSAGE = format('shardkit: this database does not own shard %s/%s (%s at epoch %s)',
                     bits >> 6, bits & 63, coalesce(o ->> 'state', 'unknown'), coalesce(o ->> 'epoch', '0')),
    DETAIL = json_build_object('shard', bits, 'epoch', coalesce((o ->> 'epoch')::int, 0),
                               'state', coalesce(o ->> 'state', 'unknown'), 'peer', o ->> 'peer')::text;
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

/** A shard this database does not own now, as its record says. */
export interface FencedShard {
  shard: number;
  epoch: number;
  state: string;
  peer: string | null;
}

const TRIGGERS = [
  { suffix: "ins", event: "INSERT", row: "NEW" },
  { suffix: "upd", event: "UPDATE", row: "OLD" },
  { suffix: "del", event: "DELETE", row: "OLD" },
] as const;

/**
 * The statements that make `table` refuse writes to the rows of `fenced` shards (their bits), or,
 * with no fenced shard, that remove its fence. The check exists only while a shard of this
 * database is fenced, moved away or incoming: a database with none pays nothing.
 *
 * The condition is the trigger's WHEN, evaluated without calling the function, so writes to the
 * other shards of a fenced database pay one expression per row. The mover's own session
 * (`SET shardkit.mover = 'on'`: copying, cleaning up) passes.
 *
 * Creating a trigger takes a SHARE ROW EXCLUSIVE lock: it waits for the writers already at work on
 * the table and holds off new ones until its transaction commits, and writers then see the
 * trigger whatever their isolation level. That is what makes the fence airtight: a writer either
 * commits before the fence, or is refused.
 */
export function fenceStatements(table: FencedTable, fenced: readonly FencedShard[]): string[] {
  const name = (suffix: string) => quote(`shardkit_fence_${suffix}`);
  if (fenced.length === 0) {
    return TRIGGERS.map((t) => `DROP TRIGGER IF EXISTS ${name(t.suffix)} ON ${quote(table.table)}`);
  }
  const list = fenced
    .map((f) => f.shard)
    .sort((a, b) => a - b)
    .join(", ");
  const records = JSON.stringify(
    Object.fromEntries(fenced.map((f) => [f.shard, { epoch: f.epoch, state: f.state, peer: f.peer }])),
  );
  return TRIGGERS.map((t) => {
    const bits = shardOfRowSql(table, t.row);
    return `CREATE OR REPLACE TRIGGER ${name(t.suffix)} BEFORE ${t.event} ON ${quote(table.table)} FOR EACH ROW
  WHEN (${bits} IN (${list}) AND current_setting('shardkit.mover', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION shardkit_refuse_write(${literal(table.column)}, ${literal(table.kind ?? "uuid")}, ${literal(records)})`;
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
