import type { PhysicalShard, ShardClient } from "@shardkit/prisma";

/** What the package asks of a database's Prisma client: raw statements and interactive transactions. */
export type Raw = {
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $transaction<R>(fn: (tx: Raw) => Promise<R>, options?: object): Promise<R>;
};

/** A database's client, as `Raw`. */
export function raw<Client extends ShardClient>(physical: PhysicalShard<Client>): Raw {
  return physical.client as unknown as Raw;
}

/** An error's message on one line: the database's own words under a driver's wrapping. */
export function lastLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error ?? "failed");
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? "failed"
  );
}
