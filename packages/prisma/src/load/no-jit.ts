// PostgreSQL's JIT off for the load ledger's reads and its rollup, in one place. The planner guesses
// the load's sums costly (above `jit_above_cost`) and compiles them, which takes hundreds of ms for
// a sum that runs in a few: the reads set it off for their own transaction, the rollup function in
// its definition (for whoever calls it). A client whose every connection starts with JIT off (the
// CLI's own: `JIT_OFF_OPTION`, marked with `markJitOff`) sends each read alone: no transaction, so
// one round trip where the guard takes four (BEGIN, SET LOCAL, the read, COMMIT).

/** The setting, as the rollup function's `SET` clause and the reads' `SET LOCAL` name it. */
export const JIT_OFF = "jit = off";

/** A database's client able to send a batch of raw statements in one transaction (a Prisma client). */
export type LoadQueryClient = {
  $queryRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown>;
  $transaction(queries: PromiseLike<unknown>[]): PromiseLike<unknown[]>;
};

/** node-postgres's `options` (a connection's startup settings) that turn JIT off for the connection. */
export const JIT_OFF_OPTION = "-c jit=off";

const jitOffClients = new WeakSet<object>();

/**
 * Says that every connection of `client` starts with JIT off (made with `JIT_OFF_OPTION`): the load's
 * reads through it are sent alone. Returns `client`.
 */
export function markJitOff<T extends object>(client: T): T {
  jitOffClients.add(client);
  return client;
}

/**
 * The rows of `sql` with `values`, with JIT off: run in a transaction of its own that turns it off,
 * or alone on a client whose connections have it off (`markJitOff`).
 */
export async function queryWithoutJit(
  client: LoadQueryClient,
  sql: string,
  ...values: unknown[]
): Promise<unknown> {
  if (jitOffClients.has(client)) return client.$queryRawUnsafe(sql, ...values);
  const [, rows] = await client.$transaction([
    client.$executeRawUnsafe(`SET LOCAL ${JIT_OFF}`),
    client.$queryRawUnsafe(sql, ...values),
  ]);
  return rows;
}
