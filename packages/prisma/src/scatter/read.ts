import type { ShardIdentifier } from "@shardkit/id";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, PlanTarget } from "../plan.js";

/** What a scatter planner knows of a model: its fields and its shard key fields. */
export interface ModelInfo {
  name: string;
  fields: Record<string, { kind: string; type: string }>;
  keys: readonly string[];
}

/**
 * A read over several databases, planned before anything runs: what each database is asked and
 * how their answers merge into the answer one database holding every row would give.
 */
export interface ScatterRead {
  /** The operation each database runs. */
  operation: string;
  /** The args one database gets, from the target's own (its `in` list already cut). */
  argsFor(target: PlanTarget): Obj;
  /** Merges the answers of the databases that answered. */
  merge(values: unknown[]): unknown;
  /** `findFirstOrThrow`: a merge that finds nothing raises Prisma's own not-found error. */
  orThrow?: boolean;
  /**
   * What must be known before the databases are asked: a cursor's row (a Prisma `cursor: { id }`,
   * read on the shard its ID names) and whether the sort fields may hold null (the keyset filter
   * depends on it, and Prisma's runtime data model does not say).
   */
  prepare?: PrepareStep;
}

/** The first step of a keyset read. */
export interface PrepareStep {
  /** A row to read first, on the shard its ID names (`findUnique` args). */
  row?: { shard: ShardIdentifier; lookup: Obj };
  /** Sort fields (the tiebreaker aside) whose nullability the keyset filter depends on. */
  fields: string[];
  /** The read, once the row (null: it does not exist) and the nullable fields are known; null for an empty result. */
  resume(row: Obj | null, nullable: ReadonlySet<string>): ScatterRead | null;
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
