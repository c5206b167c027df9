/**
 * The SQL expression of the 14 shard bits (group << 6 | member) of a ShardedUUID held in `column`
 * (a `uuid` column; a text column is cast). It reads bytes 8 and 9 of the UUID (the variant bits
 * masked off), so PostgreSQL accepts it where only built-in immutable functions may appear (an
 * index, a trigger's WHEN, a publication's row filter). `column` is used as written: quote it.
 */
export function shardBitsSql(column: string): string {
  return `(((get_byte(uuid_send(${column}::uuid), 8) & 63) << 8) | get_byte(uuid_send(${column}::uuid), 9))`;
}
