/**
 * The one place @shardkit/prisma reads Prisma's private query-hook parameters
 * (`__internalParams`, not in Prisma's types). Tested on its own (internals.test.ts) so a Prisma
 * upgrade that changes them fails there, not as a misrouted query.
 */
export interface PrismaCallInfo {
  /** Set when the call runs inside `$transaction` of the client the extension is on. */
  inTransaction: boolean;
  /** Fluent relation path (`db.customer.findUnique(...).wallets()` -> `["wallets"]`); empty otherwise. */
  fluentPath: string[];
}

export function prismaCallInfo(hookParams: unknown): PrismaCallInfo {
  const internal = (hookParams as { __internalParams?: { transaction?: unknown; dataPath?: unknown } })
    .__internalParams;
  const dataPath = Array.isArray(internal?.dataPath) ? (internal.dataPath as string[]) : [];
  return {
    inTransaction: internal?.transaction != null,
    fluentPath: dataPath.filter((segment) => segment !== "select" && segment !== "include"),
  };
}

/** Applies a fluent path to the result of the query Prisma built for it (`{ wallets: [...] }` -> `[...]`). */
export function unpackFluent(result: unknown, path: readonly string[]): unknown {
  let value = result;
  for (const field of path) {
    if (value == null) return null;
    value = (value as Record<string, unknown>)[field];
  }
  return value ?? null;
}
