import { ShardIdentifier } from "@shardkit/id";
import type { Refusal } from "./errors.js";
import { STALE_OWNER_SQLSTATE } from "./sql.js";

/**
 * The refusal a fenced database raised, if `error` is one (SQLSTATE SK001), with what the
 * database said about the shard. Looks through causes and the driver adapter's error Prisma wraps
 * (`meta.driverAdapterError.cause`, which keeps PostgreSQL's code and DETAIL).
 */
export function refusalOf(error: unknown): Refusal | undefined {
  const queue: unknown[] = [error];
  const seen = new Set<unknown>();
  while (queue.length > 0 && seen.size < 10) {
    const e = queue.shift();
    if (!e || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    const { code, detail } = e as { code?: unknown; detail?: unknown };
    if (code === STALE_OWNER_SQLSTATE && typeof detail === "string") {
      const parsed = parse(detail);
      if (parsed) return parsed;
    }
    if (isShardkitStaleOwner(e)) return (e as { refusal: Refusal }).refusal;
    queue.push(
      (e as { cause?: unknown }).cause,
      (e as { meta?: { driverAdapterError?: unknown } }).meta?.driverAdapterError,
    );
  }
  return undefined;
}

function isShardkitStaleOwner(e: object): boolean {
  return (e as { code?: unknown }).code === "STALE_OWNER" && "refusal" in e;
}

function parse(detail: string): Refusal | undefined {
  try {
    const value = JSON.parse(detail) as {
      shard?: unknown;
      epoch?: unknown;
      state?: unknown;
      peer?: unknown;
      attempt?: unknown;
      move?: { step?: unknown; holder?: unknown; attempt?: unknown; lapsed?: unknown } | null;
    };
    if (typeof value.shard !== "number" || !Number.isInteger(value.shard)) return undefined;
    if (value.shard < 0 || value.shard >= 1 << 14) return undefined;
    const move = value.move;
    return {
      shard: ShardIdentifier.fromBits(value.shard),
      epoch: typeof value.epoch === "number" ? value.epoch : 0,
      state: typeof value.state === "string" ? value.state : "unknown",
      peer: typeof value.peer === "string" ? value.peer : null,
      attempt: typeof value.attempt === "string" ? value.attempt : null,
      move:
        move && typeof move === "object" && typeof move.step === "string"
          ? {
              step: move.step,
              holder: typeof move.holder === "string" ? move.holder : "",
              attempt: typeof move.attempt === "string" ? move.attempt : "",
              lapsed: move.lapsed === true,
            }
          : null,
    };
  } catch {
    return undefined;
  }
}
