import type { ShardIdentifier, ShardkitError } from "@shardkit/id";
import type { ScatterReadOptions } from "./scatter/options.js";
import type { Resolved } from "./shard-key.js";
import type { Claim } from "./unique.js";

export type Obj = Record<string, unknown>;

/**
 * One statement on one database, made when a plan runs (see `targetsOf`): the database, the
 * logical shards of the call it holds at that moment, and the call's args for them.
 */
export interface PlanTarget {
  /** Index of the database in `registry.databases`. */
  database: number;
  shards: ShardIdentifier[];
  /** The call's args for this database (an `in` list or createMany rows cut to its shards). */
  args: Obj;
}

/**
 * The logical shards a call covers (in shard order), and its args for any set of them: an `in`
 * list or createMany rows cut to their values, the call's own args for all of them.
 */
export interface Spread {
  readonly shards: readonly ShardIdentifier[];
  /** Every shard registered (a keyless call): placed as every database holding shards now. */
  readonly every?: true;
  argsFor(shards: readonly ShardIdentifier[]): Obj;
}

/**
 * Where an operation runs, decided from (model, operation, args) and the shard keys alone, before
 * anything runs. A plan names logical shards, never databases: the runner places them on the
 * databases holding them when it runs, so a call refused by a former owner runs again, at the
 * current one, with the same plan.
 */
export type Plan =
  /**
   * One shard: the call runs on the database holding it, with `args` when set (IDs filled in, a
   * `where` by a unique field made exact). `claims`: values of fields unique across shards the
   * write takes first (a saga: claim, then the row; see `UniqueClaim`).
   */
  | { kind: "shard"; shard: ShardIdentifier; args?: Obj; claims?: Claim[] }
  /**
   * Several shards (an `in` list, createMany rows, a keyless call): one statement per database
   * holding them. On one database, its answer is the answer. Over several, a read is merged
   * exactly by `read` (set when the plan already spans several databases, or always for a page;
   * made by the runner otherwise), with `options`, the keyless scatter settings in force (an
   * `in` list has none: it fails when a database does not answer); a write runs only in `$action`
   * with `allowCrossShard`, one statement per database.
   */
  | { kind: "shards"; spread: Spread; write: boolean; read?: ScatterRead; options: ScatterReadOptions }
  /** Refused before anything runs, with the error to throw. */
  | { kind: "refuse"; error: ShardkitError };

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

/** What a plan is made in: a shard transaction, an action's commit, a per-call scatter setting. */
export interface PlanContext {
  /** Inside a transaction on this shard: the operation may name it or no shard, never another. */
  within?: ShardIdentifier | undefined;
  /** Writes over several shards are allowed (staged in `$action` with `allowCrossShard`). */
  allowCrossShard?: boolean;
  /** Per-call scatter options (`db.$scatter(options)`): keyless reads scatter with them. */
  scatter?: ScatterReadOptions | undefined;
  /** The answers of the call's lookups (its resolve step's, see `Planner.lookups`). */
  resolved?: Resolved | undefined;
}
