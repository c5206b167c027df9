import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj } from "../plan.js";

/** What a scatter planner knows of a model: its fields and its shard key fields. */
export interface ModelInfo {
  name: string;
  fields: Record<string, { kind: string; type: string }>;
  keys: readonly string[];
}

export const AGGREGATES = ["_count", "_sum", "_avg", "_min", "_max"] as const;
export type AggregateKind = (typeof AGGREGATES)[number];
/** Scalar types whose PostgreSQL order is the comparator's (strings: under the "C" collation). */
export const SORTABLE = new Set(["String", "Int", "BigInt", "Float", "DateTime", "Boolean"]);
export const SUMMABLE = new Set(["Int", "BigInt", "Float"]);

export function readWindow(args: Obj, label: string): { skip: number; take: number | undefined } {
  const skip = args.skip ?? 0;
  const take = args.take;
  if (!Number.isSafeInteger(skip) || (skip as number) < 0)
    throw new UnsupportedShardOperationError(`${label}: skip must be an integer >= 0`);
  if (take !== undefined && !(Number.isSafeInteger(take) && (take as number) >= 0))
    throw new UnsupportedShardOperationError(
      `${label}: take across shards must be an integer >= 0 (a negative take reads backwards from a cursor; reverse the orderBy instead)`,
    );
  return { skip: skip as number, take: take as number | undefined };
}

/** `{ where }` of the target's args, or nothing. */
export function whereOf(args: Obj): Obj {
  return args.where === undefined ? {} : { where: args.where };
}

export function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
