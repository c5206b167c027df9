import type { ShardIdentifier } from "@shardkit/id";
import type { MissingReason } from "@shardkit/scatter";
import { z } from "zod";

/** How a keyless read scatters: the guard, the partial policy and the limits of the fan-out. */
export interface ScatterReadOptions {
  /**
   * Most databases one scatter may query (the scatter's targets are the registry's physical
   * databases, not its logical shards). A wider scatter throws `ScatterRefusedError`. Default: no limit.
   */
  maxShards?: number;
  /** Refuse `findMany` and `groupBy` without `take` (`ScatterRefusedError`). Default: false. */
  requireLimit?: boolean;
  /**
   * `'fail'` (default): a database that does not answer throws scatter's `ScatterError` naming its
   * shards. `'partial'`: the result is built from the databases that answered, and the report
   * (`onReport`) lists the missing shards.
   */
  policy?: "fail" | "partial";
  /** Most databases queried at once. Default: all at once. */
  concurrency?: number;
  /**
   * Deadline of the whole scatter in ms: databases that have not answered by then count as missing.
   * Prisma cannot cancel a query: it keeps running on its server until it finishes.
   */
  deadlineMs?: number;
  /** Receives the report of every scatter that returned (complete or not): which shards are missing and why, with timings. */
  onReport?: (report: ScatterReport) => void;
}

/** `keyless: { mode: 'scatter', ... }`: keyless reads scatter with these options. */
export interface KeylessScatterOptions extends ScatterReadOptions {
  mode: "scatter";
}

/**
 * What a keyless operation (its arguments name no shard) does when the registry has more than one
 * database: `'refuse'` (default) throws `ShardKeyRequiredError`; `'scatter'` (or an options
 * object) runs keyless reads on every database and merges them. Keyless writes are always refused.
 */
export type KeylessPolicy = "refuse" | "scatter" | KeylessScatterOptions;

/** One database of a scatter. */
export interface ScatterTargetReport {
  /** `"1/1,1/2 (database #2)"`: the shards the database holds and its index in `registry.databases`. */
  key: string;
  shards: ShardIdentifier[];
  status: "fulfilled" | "missing";
  /** Why it is missing (see `@shardkit/scatter`). */
  reason?: MissingReason;
  error?: unknown;
  durationMs: number | null;
  /** Rows it returned (findMany, findFirst, groupBy). */
  rows?: number;
}

/** What a scatter read did: handed to `onReport` once the merged result is ready. */
export interface ScatterReport {
  model: string;
  operation: string;
  /** True when every database answered: the result is exact. */
  complete: boolean;
  /** The databases that did not answer, each naming the shards it holds. */
  missing: ScatterTargetReport[];
  /** Every logical shard whose rows are missing from the result. */
  missingShards: ShardIdentifier[];
  targets: ScatterTargetReport[];
  durationMs: number;
}

const readOptions = {
  maxShards: z.union([z.literal(Number.POSITIVE_INFINITY), z.int().min(1)], {
    error: "expected an integer >= 1 or Infinity",
  }),
  requireLimit: z.boolean(),
  policy: z.enum(["fail", "partial"], { error: "expected 'fail' or 'partial'" }),
  concurrency: z.int({ error: "expected an integer >= 1" }).min(1, { error: "expected an integer >= 1" }),
  deadlineMs: z.number({ error: "expected a finite number >= 0" }).min(0).finite(),
  onReport: z.custom<(report: ScatterReport) => void>((v) => typeof v === "function", {
    error: "expected a function",
  }),
};
const readSchema = z.strictObject(
  Object.fromEntries(Object.entries(readOptions).map(([k, v]) => [k, v.optional()])) as {
    [K in keyof typeof readOptions]: z.ZodOptional<(typeof readOptions)[K]>;
  },
);
const keylessObject = readSchema.extend({ mode: z.literal("scatter", { error: "expected 'scatter'" }) });

/** Problems of scatter read options (`$scatter(options)`), each naming its path; empty when valid. */
export function scatterOptionIssues(value: unknown, path: string): string[] {
  return issuesOf(readSchema.safeParse(value), path);
}

/** A `keyless` setting as options (`null`: refuse; `undefined`: not set); problems go to `issues`. */
export function parseKeyless(
  value: unknown,
  path: string,
  issues: string[],
): KeylessScatterOptions | null | undefined {
  if (value === undefined) return undefined;
  if (value === "refuse") return null;
  if (value === "scatter") return { mode: "scatter" };
  if (typeof value !== "object" || value === null) {
    issues.push(
      `${path}: expected 'refuse', 'scatter' or { mode: 'scatter', ... }, got ${JSON.stringify(value)}`,
    );
    return undefined;
  }
  const found = issuesOf(keylessObject.safeParse(value), path);
  issues.push(...found);
  return found.length === 0 ? (value as KeylessScatterOptions) : undefined;
}

function issuesOf(result: z.ZodSafeParseResult<unknown>, path: string): string[] {
  if (result.success) return [];
  return result.error.issues.flatMap((issue) => {
    if (issue.code === "unrecognized_keys") return issue.keys.map((k) => `${path}.${k}: unknown option`);
    const at = issue.path.map(String).join(".");
    return [`${at ? `${path}.${at}` : path}: ${issue.message}`];
  });
}
