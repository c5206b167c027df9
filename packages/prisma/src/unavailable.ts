import { isShardkitError } from "@shardkit/id";

/**
 * Prisma's codes for a database it cannot reach, a connection that broke, or no connection or
 * transaction slot in time: conditions that pass, so a retry may succeed.
 */
const UNAVAILABLE_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2028"]);
/** SQLSTATEs of a connection that failed (class 08) or a server shutting down or starting (57P01-57P03). */
const SQLSTATE_UNAVAILABLE = /^(08[0-9A-Z]{3}|57P0[123])$/;
/** Node's socket errors for a server that is down or went away. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
]);
/** PostgreSQL's SQLSTATEs for a transaction that lost a race and may simply be run again. */
const RACE_STATES = new Set(["40001", "40P01"]);

/**
 * True when `error` says a shard's database is unavailable for now (down, unreachable, shutting
 * down, its connection broken, out of connections or transaction slots), or a scatter missed a
 * database: a retry later may succeed, and an API should answer 503 naming the shard rather than
 * 500. Looks through the error's causes and the driver adapter's error Prisma wraps.
 */
export function isShardUnavailable(error: unknown): boolean {
  return causes(error).some((e) => {
    const code = (e as { code?: unknown }).code;
    const name = (e as { name?: unknown }).name;
    if (name === "PrismaClientKnownRequestError" && UNAVAILABLE_CODES.has(String(code))) return true;
    if (name === "PrismaClientInitializationError") return true;
    if (typeof code === "string" && (SOCKET_CODES.has(code) || SQLSTATE_UNAVAILABLE.test(code))) return true;
    if (
      isShardkitError(e, "TARGETS_FAILED") ||
      isShardkitError(e, "DEADLINE_EXCEEDED") ||
      isShardkitError(e, "SHARD_TIMEOUT") ||
      isShardkitError(e, "COMMAND_UNAVAILABLE") ||
      isShardkitError(e, "ATOMIC_IN_DOUBT") ||
      isShardkitError(e, "DATABASE_TIMEOUT") ||
      isShardkitError(e, "DATABASE_UNAVAILABLE") ||
      // @shardkit/ownership's: a shard between owners for longer than the retries, a shard whose
      // ownership records cannot be right, a database that has not answered the map's read.
      isShardkitError(e, "STALE_OWNER") ||
      isShardkitError(e, "INVALID_MAP") ||
      isShardkitError(e, "NO_ANSWER")
    )
      return true;
    const kind = (e as { kind?: unknown }).kind; // a driver adapter's error, e.g. DatabaseNotReachable
    return kind === "DatabaseNotReachable" || kind === "ConnectionClosed" || kind === "SocketTimeout";
  });
}

/** Prisma's codes for a server it could not reach, or a connection that broke. */
const CONNECTION_CODES = new Set(["P1001", "P1002", "P1017"]);

/**
 * True when `error` is a failure to reach a database or a connection to it that broke: Prisma's
 * own error of that kind, the driver adapter's error it wraps, or the driver's socket error. Unlike
 * `isShardUnavailable`, it does not look through other causes (a step's own error whose cause is a
 * refused connection elsewhere is not the database's), nor count waits (P2024, P2028) or deadlines.
 */
export function isConnectionFailure(error: unknown): boolean {
  const own = error as { meta?: { driverAdapterError?: { cause?: unknown } } } | undefined;
  const adapter = own?.meta?.driverAdapterError;
  return [error, adapter, adapter?.cause].some((e) => {
    if (!e || typeof e !== "object") return false;
    const { code, name, kind } = e as { code?: unknown; name?: unknown; kind?: unknown };
    if (name === "PrismaClientInitializationError") return true;
    if (name === "PrismaClientKnownRequestError") return CONNECTION_CODES.has(String(code));
    if (typeof code === "string" && (SOCKET_CODES.has(code) || SQLSTATE_UNAVAILABLE.test(code))) return true;
    return kind === "DatabaseNotReachable" || kind === "ConnectionClosed";
  });
}

/**
 * True when a transaction failed on a race it may win if run again: a deadlock (40P01), a
 * serialization failure (40001), Prisma's write conflict (P2034), or no transaction slot or
 * connection in time (P2028, P2024). `$transactionOn(..., { retries })` retries those.
 */
export function isTransientTransactionError(error: unknown): boolean {
  return causes(error).some((e) => {
    const code = (e as { code?: unknown }).code;
    if (code === "P2034" || code === "P2028" || code === "P2024") return true;
    if (typeof code === "string" && RACE_STATES.has(code)) return true;
    const message = (e as { message?: unknown }).message;
    return (
      typeof message === "string" &&
      /\b(40P01|40001)\b|deadlock detected|could not serialize access/.test(message)
    );
  });
}

/**
 * PostgreSQL's SQLSTATE behind `error` (`42704`, `55000`, ...): from the driver adapter's error
 * Prisma wraps, or the error itself (node-postgres); undefined when none is found.
 */
export function sqlStateOf(error: unknown): string | undefined {
  for (const e of causes(error)) {
    for (const code of [(e as { originalCode?: unknown }).originalCode, (e as { code?: unknown }).code]) {
      if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !/^P\d{4}$/.test(code)) return code;
    }
  }
  return undefined;
}

/**
 * An error and what it wraps: its `cause` chain and, for Prisma's errors, the driver adapter's
 * error (`meta.driverAdapterError`, whose `cause` holds PostgreSQL's SQLSTATE).
 */
function causes(error: unknown): object[] {
  const out: object[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && out.length < 10) {
    const e = queue.shift();
    if (!e || typeof e !== "object" || out.includes(e)) continue;
    out.push(e);
    queue.push(
      (e as { cause?: unknown }).cause,
      (e as { meta?: { driverAdapterError?: unknown } }).meta?.driverAdapterError,
    );
  }
  return out;
}
