import type { ShardIdentifier, ShardkitError } from "@shardkit/id";
import type { ScatterReadOptions } from "./scatter/options.js";
import type { Resolved } from "./shard-key.js";
import type { Claim } from "./unique.js";

export type Obj = Record<string, unknown>;

/** One statement on one physical database: the logical shards of it the statement covers, and its args. */
export interface PlanTarget {
  /** Index of the database in `registry.databases`. */
  database: number;
  shards: ShardIdentifier[];
  /** The call's args for this database (an `in` list or createMany rows cut to its shards). */
  args: Obj;
}

/**
 * Where an operation runs, decided from (model, operation, args) and the placement of shards alone,
 * before anything runs. The executor runs a plan; it never decides where.
 */
export type Plan =
  /**
   * One shard: the call runs on the database holding it, with `args` when set (IDs filled in, a
   * `where` by a unique field made exact). `claims`: values of fields unique across shards the
   * write takes first (a saga: claim, then the row; see `UniqueClaim`).
   */
  | { kind: "shard"; shard: ShardIdentifier; database: number; args?: Obj; claims?: Claim[] }
  /**
   * One statement on one database that covers several shards (an `in` list whose shards share a
   * database; a keyless call in single-database mode): the database's answer is the answer.
   */
  | { kind: "database"; target: PlanTarget }
  /**
   * A read over several databases: one statement each, merged exactly by `read`. `options` are
   * the keyless scatter settings in force (policy, deadline, report); an `in` list over several
   * databases has none (it fails when a database does not answer).
   */
  | { kind: "scatter"; targets: PlanTarget[]; read: ScatterRead; options: ScatterReadOptions }
  /** A write over several databases (only inside `$action` with `allowCrossShard`): one statement each. */
  | { kind: "split"; targets: PlanTarget[] }
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
