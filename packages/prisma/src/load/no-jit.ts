// PostgreSQL's JIT off for the load ledger's reads and its rollup, in one place. The planner guesses
// the load's sums costly (above `jit_above_cost`) and compiles them, which takes hundreds of ms for
// a sum that runs in a few: the reads set it off for their own transaction, the rollup function in
// its definition (for whoever calls it).

/** The setting, as the rollup function's `SET` clause and the reads' `SET LOCAL` name it. */
export const JIT_OFF = "jit = off";

/** A database's client able to send a batch of raw statements in one transaction (a Prisma client). */
export type LoadQueryClient = {
  $queryRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown>;
  $transaction(queries: PromiseLike<unknown>[]): PromiseLike<unknown[]>;
};

/** The rows of `sql` with `values`, run in a transaction of its own with JIT off. */
export async function queryWithoutJit(
  client: LoadQueryClient,
  sql: string,
  ...values: unknown[]
): Promise<unknown> {
  const [, rows] = await client.$transaction([
    client.$executeRawUnsafe(`SET LOCAL ${JIT_OFF}`),
    client.$queryRawUnsafe(sql, ...values),
  ]);
  return rows;
}
