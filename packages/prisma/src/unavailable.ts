import { isShardkitError } from "@shardkit/id";

/**
 * Prisma's codes for a database it cannot reach, a connection that broke, or no connection or
 * transaction slot in time: conditions that pass, so a retry may succeed.
 */
const UNAVAILABLE_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2028"]);
/** Node's socket errors for a server that is down or went away. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
]);

/**
 * True when `error` says a shard's database is unavailable for now (down, unreachable, its
 * connection broken, out of connections or transaction slots), or a scatter missed a database: a
 * retry later may succeed, and an API should answer 503 naming the shard rather than 500. Looks at
 * the error and its `cause` chain.
 */
export function isShardUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    const name = (e as { name?: unknown }).name;
    if (name === "PrismaClientKnownRequestError" && UNAVAILABLE_CODES.has(String(code))) return true;
    if (name === "PrismaClientInitializationError") return true;
    if (typeof code === "string" && SOCKET_CODES.has(code)) return true;
    if (isShardkitError(e, "TARGETS_FAILED") || isShardkitError(e, "DEADLINE_EXCEEDED")) return true;
    const kind = (e as { kind?: unknown }).kind; // a driver adapter's error, e.g. DatabaseNotReachable
    if (kind === "DatabaseNotReachable" || kind === "ConnectionClosed" || kind === "SocketTimeout")
      return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
