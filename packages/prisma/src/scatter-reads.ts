import { AsyncLocalStorage } from "node:async_hooks";
import { ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import {
  type AggregateRequest,
  type AggregateResult,
  compareBy,
  type GroupRow,
  keysetWhere,
  type MissingReason,
  mergeAggregates,
  mergeGroupBy,
  mergeSorted,
  type NormalizedSortKey,
  normalizeOrderBy,
  planAggregate,
  positionOf,
  ScatterError,
  type ScatterResult,
  scatter,
} from "@shardkit/scatter";
import type { DataModel } from "./data-model.js";
import { ScatterRefusedError, UnsupportedShardOperationError } from "./errors.js";

type Obj = Record<string, unknown>;

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
  /** `"1/1,1/2 (database #2)"`: the shards the database holds and its index in `registry.physical`. */
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

/** One place a scatter read runs: a physical database (keyless) or one shard's part of an `in` list. */
export interface ReadTarget {
  key: string;
  shards: ShardIdentifier[];
  client: object;
  /** Arguments that replace the call's own (an `in` list cut to this shard). */
  args: Obj;
}

type Call = (client: object, model: string, operation: string, args: unknown) => Promise<unknown>;

/** Keyless reads that scatter. */
export const SCATTER_READS = new Set([
  "findMany",
  "findFirst",
  "findFirstOrThrow",
  "count",
  "aggregate",
  "groupBy",
]);

const AGGREGATES = ["_count", "_sum", "_avg", "_min", "_max"] as const;
/** Scalar types whose PostgreSQL order is the comparator's (strings: under the "C" collation). */
const SORTABLE = new Set(["String", "Int", "BigInt", "Float", "DateTime", "Boolean"]);
const SUMMABLE = new Set(["Int", "BigInt", "Float"]);
const OPTION_KEYS = new Set([
  "mode",
  "maxShards",
  "requireLimit",
  "policy",
  "concurrency",
  "deadlineMs",
  "onReport",
]);

/** Per-call scatter options, set by `db.$scatter(options)` for the calls made through its view. */
const scatterCall = new AsyncLocalStorage<KeylessScatterOptions>();

/** Checks scatter read options; returns the problems found (empty when valid). */
export function scatterOptionIssues(value: unknown, path: string, withMode: boolean): string[] {
  if (typeof value !== "object" || value === null) return [`${path}: expected an object`];
  const o = value as Obj;
  const issues: string[] = [];
  for (const key of Object.keys(o)) {
    if (!OPTION_KEYS.has(key) || (!withMode && key === "mode")) issues.push(`${path}.${key}: unknown option`);
  }
  if (withMode && o.mode !== "scatter") issues.push(`${path}.mode: expected 'scatter'`);
  if (
    o.maxShards !== undefined &&
    !(
      o.maxShards === Number.POSITIVE_INFINITY ||
      (Number.isSafeInteger(o.maxShards) && (o.maxShards as number) >= 1)
    )
  )
    issues.push(`${path}.maxShards: expected an integer >= 1 or Infinity`);
  if (o.requireLimit !== undefined && typeof o.requireLimit !== "boolean")
    issues.push(`${path}.requireLimit: expected a boolean`);
  if (o.policy !== undefined && o.policy !== "fail" && o.policy !== "partial")
    issues.push(`${path}.policy: expected 'fail' or 'partial'`);
  if (o.concurrency !== undefined && !(Number.isSafeInteger(o.concurrency) && (o.concurrency as number) >= 1))
    issues.push(`${path}.concurrency: expected an integer >= 1`);
  if (
    o.deadlineMs !== undefined &&
    !(typeof o.deadlineMs === "number" && Number.isFinite(o.deadlineMs) && o.deadlineMs >= 0)
  )
    issues.push(`${path}.deadlineMs: expected a finite number >= 0`);
  if (o.onReport !== undefined && typeof o.onReport !== "function")
    issues.push(`${path}.onReport: expected a function`);
  return issues;
}

/** A `keyless` setting as options (`null`: refuse; `undefined`: not set), or its problems. */
export function parseKeyless(
  value: unknown,
  path: string,
  issues: string[],
): KeylessScatterOptions | null | undefined {
  if (value === undefined) return undefined;
  if (value === "refuse") return null;
  if (value === "scatter") return { mode: "scatter" };
  if (typeof value === "object" && value !== null) {
    const found = scatterOptionIssues(value, path, true);
    issues.push(...found);
    return found.length === 0 ? (value as KeylessScatterOptions) : undefined;
  }
  issues.push(
    `${path}: expected 'refuse', 'scatter' or { mode: 'scatter', ... }, got ${JSON.stringify(value)}`,
  );
  return undefined;
}

/**
 * A view of `client` whose model calls run with the per-call scatter options: keyless reads made
 * through it scatter (whatever the model's or the extension's `keyless` setting). Everything else
 * (keyed operations, `$shard`, ...) behaves as on `client`. Its model methods return plain promises.
 */
export function scatterView<T extends object>(
  client: T,
  isDelegate: (key: string) => boolean,
  options: ScatterReadOptions,
): T {
  const issues = scatterOptionIssues(options, "$scatter(options)", false);
  if (issues.length > 0) throw new ScatterError("INVALID_OPTIONS", issues.join("; "));
  const scoped: KeylessScatterOptions = { ...options, mode: "scatter" };
  const delegates = new Map<string, object>();
  return new Proxy(client, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof prop === "string" && isDelegate(prop) && typeof value === "object" && value !== null) {
        let view = delegates.get(prop);
        if (!view) {
          view = new Proxy(value, {
            get(delegate, method) {
              const fn = Reflect.get(delegate, method);
              if (typeof fn !== "function") return fn;
              return (...args: unknown[]) =>
                scatterCall.run(
                  scoped,
                  // Prisma's promises are lazy: start the query (then) inside the scope.
                  () =>
                    new Promise((resolve, reject) => {
                      (fn.apply(delegate, args) as PromiseLike<unknown>).then(resolve, reject);
                    }),
                );
            },
          });
          delegates.set(prop, view);
        }
        return view;
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Reads that span databases: keyless reads scattered over every physical database, and reads whose
 * `in` list spans shards. Rewrites orderBy / skip / take / cursor per database and merges with
 * `@shardkit/scatter` (one comparator, one aggregate merge), so the result is the one a single
 * database holding every row would return.
 */
export class ScatterReads {
  private readonly models: Record<string, KeylessScatterOptions | null>;

  constructor(
    private readonly dataModel: DataModel,
    private readonly keysOf: (model: string) => readonly string[],
    private readonly clientOfId: (id: string) => object,
    private readonly call: Call,
    private readonly global: KeylessScatterOptions | null,
    models: Record<string, KeylessScatterOptions | null>,
  ) {
    this.models = models;
  }

  /** The scatter options of a keyless read of `model` (per call, else per model, else global), or null to refuse. */
  optionsFor(model: string): KeylessScatterOptions | null {
    const base = model in this.models ? (this.models[model] ?? null) : this.global;
    const perCall = scatterCall.getStore();
    if (perCall) return { ...(base ?? {}), ...perCall, mode: "scatter" };
    return base;
  }

  /** Refuses a scatter over more databases than `maxShards`, or without a limit under `requireLimit`. */
  guard(
    model: string,
    operation: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
  ) {
    const max = options.maxShards;
    if (max !== undefined && targets.length > max) {
      throw new ScatterRefusedError(
        model,
        operation,
        "maxShards",
        `a keyless read would scatter over ${targets.length} databases (${targets.map((t) => t.key).join("; ")}), more than maxShards ${max}. Add a shard key to the query, or override per call with $scatter({ maxShards })`,
      );
    }
    if (
      options.requireLimit &&
      (operation === "findMany" || operation === "groupBy") &&
      args.take === undefined
    ) {
      throw new ScatterRefusedError(
        model,
        operation,
        "requireLimit",
        "a keyless read without `take` would scatter with no limit (requireLimit). Add take, or override per call with $scatter({ requireLimit: false })",
      );
    }
  }

  /** Runs `model.operation(args)` on every target and merges the results. */
  async read(
    model: string,
    operation: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
  ): Promise<unknown> {
    const label = `${model}.${operation}`;
    switch (operation) {
      case "findMany":
        return this.findMany(model, label, args, targets, options, readWindow(args, label));
      case "findFirst":
      case "findFirstOrThrow": {
        const { skip } = readWindow(args, label);
        if (args.take !== undefined && args.take !== 1)
          throw new UnsupportedShardOperationError(`${label}: take must be 1 (or absent) across shards`);
        const { rows, result } = await this.findRowsAndResult(model, label, args, targets, options, {
          skip,
          take: 1,
        });
        if (rows[0] !== undefined) return rows[0];
        if (operation === "findFirst") return null;
        // Let Prisma raise its own not-found error, from a database that answered.
        const answered = result?.outcomes.find((o) => o.status === "fulfilled")?.target ?? targets[0]!;
        return this.call(answered.client, model, "findFirstOrThrow", { where: { id: { in: [] } } });
      }
      case "count":
        return this.count(model, label, args, targets, options);
      case "aggregate":
        return this.aggregate(model, label, args, targets, options);
      case "groupBy":
        return this.groupBy(model, label, args, targets, options);
      default:
        throw new UnsupportedShardOperationError(`${label} cannot run across shards`);
    }
  }

  private async findMany(
    model: string,
    label: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
    window: { skip: number; take: number | undefined },
  ): Promise<Obj[]> {
    return (await this.findRowsAndResult(model, label, args, targets, options, window)).rows;
  }

  private async findRowsAndResult(
    model: string,
    label: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
    window: { skip: number; take: number | undefined },
  ): Promise<{ rows: Obj[]; result: ScatterResult<ReadTarget, unknown> | null }> {
    if (args.distinct !== undefined)
      throw new UnsupportedShardOperationError(`${label} with distinct across shards is not supported`);
    const tiebreaker = this.tiebreakerOf(model, label);
    const { keys, orderBy } = this.sortKeys(model, label, args.orderBy, tiebreaker);
    let after: Obj | undefined;
    if (args.cursor !== undefined) {
      const id = cursorId(args.cursor, tiebreaker, label);
      // The cursor's ID names its shard: read its sort values there, then ask every database for
      // the rows at or after it (Prisma's cursor includes the cursor row itself).
      const row = (await this.call(this.clientOfId(id), model, "findUnique", {
        where: { [tiebreaker]: id },
        select: Object.fromEntries(keys.map((k) => [k.field, true])),
      })) as Obj | null;
      if (row === null) return { rows: [], result: null };
      const client = this.clientOfId(id);
      const nullable = new Set<string>();
      for (const k of keys) {
        if (
          k.field !== tiebreaker &&
          (row[k.field] === null || (await this.isNullable(client, model, k.field)))
        )
          nullable.add(k.field);
      }
      const keyset = dropNullTerms(keysetWhere(positionOf(row, keys)), nullable) as Obj;
      after = { OR: [{ [tiebreaker]: id }, ...(keyset.OR as Obj[])] };
    }
    const { take, skip } = window;
    if (take === 0) return { rows: [], result: null };
    const { selection, added } = withFields(
      args,
      keys.map((k) => k.field),
    );
    const result = await this.scatter(model, "findMany", targets, options, (t) => {
      const a: Obj = { ...args, ...t.args, ...selection, orderBy };
      delete a.skip;
      delete a.cursor;
      if (take === undefined) delete a.take;
      else a.take = skip + take;
      const where = and(a.where, after);
      if (where === undefined) delete a.where;
      else a.where = where;
      return a;
    });
    const rows = mergeSorted(result.values as Obj[][], keys, { offset: skip, limit: take });
    if (added.length > 0) for (const row of rows) for (const f of added) delete row[f];
    this.report(model, "findMany", result, options);
    return { rows, result };
  }

  private async count(
    model: string,
    label: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
  ): Promise<unknown> {
    if (args.cursor !== undefined || args.distinct !== undefined)
      throw new UnsupportedShardOperationError(
        `${label} with cursor or distinct across shards is not supported`,
      );
    const { skip, take } = readWindow(args, label);
    const select = typeof args.select === "object" && args.select !== null ? (args.select as Obj) : undefined;
    const windowed = skip > 0 || take !== undefined;
    if (windowed && select && Object.keys(select).some((f) => f !== "_all" && select[f]))
      throw new UnsupportedShardOperationError(
        `${label}: counting fields of a skip/take window across shards depends on which rows are in it; count _all or drop skip/take`,
      );
    const result = await this.scatter(model, "count", targets, options, (t) => {
      const where = ({ ...args, ...t.args } as Obj).where;
      return { ...(where === undefined ? {} : { where }), ...(select ? { select } : {}) };
    });
    const request: AggregateRequest = { _count: select ? (select as Record<string, boolean>) : true };
    const merged = mergeAggregates(
      result.values.map((v) => ({ _count: v as number })),
      request,
    )._count as number | Record<string, number>;
    this.report(model, "count", result, options);
    if (!windowed) return merged;
    const total = typeof merged === "number" ? merged : (merged._all as number);
    const inWindow = Math.max(0, Math.min(take ?? Number.POSITIVE_INFINITY, total - skip));
    return typeof merged === "number" ? inWindow : { ...merged, _all: inWindow };
  }

  private async aggregate(
    model: string,
    label: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
  ): Promise<unknown> {
    if (args.cursor !== undefined || args.take !== undefined || (args.skip !== undefined && args.skip !== 0))
      throw new UnsupportedShardOperationError(
        `${label} over a cursor/skip/take window across shards is not supported (the window depends on an order across every shard)`,
      );
    const request = this.aggregateRequest(model, label, args);
    const plan = planAggregate(request);
    const result = await this.scatter(model, "aggregate", targets, options, (t) => {
      const where = ({ ...args, ...t.args } as Obj).where;
      return { ...(where === undefined ? {} : { where }), ...plan };
    });
    const merged = mergeAggregates(result.values as AggregateResult[], request);
    this.report(model, "aggregate", result, options);
    return merged;
  }

  private async groupBy(
    model: string,
    label: string,
    args: Obj,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
  ): Promise<unknown> {
    if (args.having !== undefined && !(isObj(args.having) && Object.keys(args.having).length === 0))
      throw new UnsupportedShardOperationError(
        `${label} with having across shards is not supported: a group's totals exist only after the merge. Filter the merged groups instead`,
      );
    const by = (Array.isArray(args.by) ? args.by : [args.by]) as string[];
    for (const f of by) {
      const field = this.field(model, f);
      if (!field || !(field.kind === "enum" || (field.kind === "scalar" && SORTABLE.has(field.type))))
        throw new UnsupportedShardOperationError(
          `${label}: groupBy across shards by ${f} is not supported (group by String, Int, BigInt, Float, DateTime, Boolean or enum fields)`,
        );
    }
    const { skip, take } = readWindow(args, label);
    const request = this.aggregateRequest(model, label, args);
    // Ordering by an aggregate that is not selected: compute it too, drop it after sorting.
    const full: AggregateRequest = { ...request };
    const order: { get: (row: GroupRow) => unknown; key: NormalizedSortKey }[] = [];
    const entries =
      args.orderBy === undefined ? [] : Array.isArray(args.orderBy) ? args.orderBy : [args.orderBy];
    for (const entry of entries as unknown[]) {
      for (const [name, spec] of Object.entries(isObj(entry) ? entry : {})) {
        if (spec === undefined) continue;
        const i = order.length;
        if ((AGGREGATES as readonly string[]).includes(name) && isObj(spec) && !("sort" in spec)) {
          const kind = name as (typeof AGGREGATES)[number];
          for (const [f, s] of Object.entries(spec)) {
            if (s === undefined) continue;
            this.checkAggregateField(model, label, kind, f);
            addToRequest(full, kind, f);
            const k = normalizeOrderBy({ [`k${order.length}`]: s as "asc" } as never)[0]!;
            order.push({ get: (row) => (row[kind] as Obj | undefined)?.[f], key: k });
          }
        } else {
          if (!by.includes(name))
            throw new UnsupportedShardOperationError(
              `${label}: orderBy ${name} must be one of by or an aggregate`,
            );
          const field = this.field(model, name);
          if (field?.kind !== "scalar")
            throw new UnsupportedShardOperationError(
              `${label}: ordering groups by the enum ${name} across shards is not supported`,
            );
          const k = normalizeOrderBy({ [`k${i}`]: spec } as never)[0]!;
          order.push({ get: (row) => row[name], key: k });
        }
      }
    }
    const plan = planAggregate(full);
    const result = await this.scatter(model, "groupBy", targets, options, (t) => {
      const where = ({ ...args, ...t.args } as Obj).where;
      return { by, ...(where === undefined ? {} : { where }), ...plan };
    });
    let groups = mergeGroupBy(result.values as GroupRow[][], by, full);
    if (order.length > 0) {
      const cmp = compareBy<Obj>(order.map((o) => o.key));
      groups = groups
        .map((row) => ({ row, k: Object.fromEntries(order.map((o) => [o.key.field, o.get(row)])) }))
        .sort((a, b) => cmp(a.k, b.k))
        .map((x) => x.row);
    }
    groups = groups.slice(skip, take === undefined ? undefined : skip + take);
    this.report(model, "groupBy", result, options);
    return groups.map((row) => project(row, request));
  }

  private aggregateRequest(model: string, label: string, args: Obj): AggregateRequest {
    const request: Obj = {};
    for (const kind of AGGREGATES) {
      const value = args[kind];
      if (value === undefined) continue;
      if (kind === "_count" && value === true) {
        request._count = true;
        continue;
      }
      if (!isObj(value)) throw new UnsupportedShardOperationError(`${label}: ${kind} must list fields`);
      for (const f of Object.keys(value)) if (value[f]) this.checkAggregateField(model, label, kind, f);
      request[kind] = value;
    }
    return request as AggregateRequest;
  }

  private checkAggregateField(model: string, label: string, kind: string, f: string): void {
    if (kind === "_count") return;
    const field = this.field(model, f);
    const ok =
      field?.kind === "scalar" && (kind === "_sum" || kind === "_avg" ? SUMMABLE : SORTABLE).has(field.type);
    if (!ok)
      throw new UnsupportedShardOperationError(
        `${label}: ${kind}.${f} across shards is not supported (${field ? `${field.type} values` : "no such field"}; sums and averages merge Int, BigInt and Float, min/max also String, DateTime and Boolean)`,
      );
  }

  private readonly nullable = new Map<string, boolean>();

  /**
   * Whether a scalar field may hold null. Prisma's runtime data model does not say, and Prisma
   * refuses `{ field: null }` for a required field, so ask once per field (a query that matches
   * nothing; a required field fails Prisma's validation before reaching the database).
   */
  private async isNullable(client: object, model: string, field: string): Promise<boolean> {
    const key = `${model}.${field}`;
    let known = this.nullable.get(key);
    if (known === undefined) {
      try {
        await this.call(client, model, "findFirst", {
          where: { AND: [{ [field]: null }, { id: { in: [] } }] },
          select: { id: true },
        });
        known = true;
      } catch (error) {
        if ((error as { name?: unknown } | null)?.name !== "PrismaClientValidationError") throw error;
        known = false;
      }
      this.nullable.set(key, known);
    }
    return known;
  }

  private field(model: string, name: string) {
    return this.dataModel.models[model]?.fields[name];
  }

  /** The unique field that makes a merged order total: the model's `id`, a String shard key (a ShardedUUID). */
  private tiebreakerOf(model: string, label: string): string {
    const id = this.field(model, "id");
    if (id?.kind === "scalar" && id.type === "String" && this.keysOf(model).includes("id")) return "id";
    throw new UnsupportedShardOperationError(
      `${label} across shards needs ${model}.id to be a String shard key (a ShardedUUID): the merged order is broken by id`,
    );
  }

  /** The order every database sorts by: the caller's, cut after `id`, with `id` appended when absent. */
  private sortKeys(
    model: string,
    label: string,
    input: unknown,
    tiebreaker: string,
  ): { keys: NormalizedSortKey[]; orderBy: Obj[] } {
    const orderBy: Obj[] = [];
    const entries = input === undefined ? [] : Array.isArray(input) ? input : [input];
    for (const entry of entries as unknown[]) {
      if (!isObj(entry))
        throw new UnsupportedShardOperationError(`${label}: orderBy entries must be objects`);
      for (const [name, spec] of Object.entries(entry)) {
        if (spec === undefined) continue;
        const field = this.field(model, name);
        const scalar = field?.kind === "scalar" && SORTABLE.has(field.type);
        const direct = spec === "asc" || spec === "desc" || (isObj(spec) && "sort" in spec);
        if (!scalar || !direct)
          throw new UnsupportedShardOperationError(
            `${label}: orderBy ${name} across shards is not supported (order by String, Int, BigInt, Float, DateTime or Boolean fields; relation, aggregate, enum and Decimal ordering are not merged)`,
          );
        if (!orderBy.some((o) => name in o)) orderBy.push({ [name]: spec });
      }
    }
    const cut = orderBy.findIndex((o) => tiebreaker in o);
    if (cut >= 0)
      orderBy.length = cut + 1; // keys after a unique one never apply
    else orderBy.push({ [tiebreaker]: "asc" });
    return { keys: normalizeOrderBy(orderBy as never), orderBy };
  }

  private async scatter(
    model: string,
    operation: string,
    targets: readonly ReadTarget[],
    options: ScatterReadOptions,
    argsFor: (target: ReadTarget) => Obj,
  ): Promise<ScatterResult<ReadTarget, unknown>> {
    return scatter(targets, (t) => this.call(t.client, model, operation, argsFor(t)), {
      policy: options.policy ?? "fail",
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}),
      key: (t) => t.key,
    });
  }

  private report(
    model: string,
    operation: string,
    result: ScatterResult<ReadTarget, unknown>,
    options: ScatterReadOptions,
  ): void {
    if (!options.onReport) return;
    const targets: ScatterTargetReport[] = result.outcomes.map((o) =>
      o.status === "fulfilled"
        ? {
            key: o.key,
            shards: o.target.shards,
            status: o.status,
            durationMs: o.durationMs,
            ...(o.rows !== undefined ? { rows: o.rows } : {}),
          }
        : {
            key: o.key,
            shards: o.target.shards,
            status: o.status,
            reason: o.reason,
            error: o.error,
            durationMs: o.durationMs,
          },
    );
    const missing = targets.filter((t) => t.status === "missing");
    options.onReport({
      model,
      operation,
      complete: result.complete,
      missing,
      missingShards: missing.flatMap((t) => t.shards).sort((a, b) => a.bits - b.bits),
      targets,
      durationMs: result.durationMs,
    });
  }
}

/** The keyless targets: one per physical database, named by the shards it holds. */
export function databaseTargets(
  physical: readonly { client: object; shards: readonly ShardIdentifier[]; index: number }[],
): ReadTarget[] {
  return physical.map((p) => ({
    key: `${p.shards.map((s) => s.key).join(",")} (database #${p.index})`,
    shards: [...p.shards],
    client: p.client,
    args: {},
  }));
}

function readWindow(args: Obj, label: string): { skip: number; take: number | undefined } {
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

function cursorId(cursor: unknown, tiebreaker: string, label: string): string {
  if (isObj(cursor)) {
    const keys = Object.keys(cursor).filter((k) => cursor[k] !== undefined);
    const id = cursor[tiebreaker];
    if (keys.length === 1 && typeof id === "string" && ShardedUUID.isValid(id)) return id;
  }
  throw new UnsupportedShardOperationError(
    `${label}: a cursor across shards must be { ${tiebreaker}: <ShardedUUID> } (the ID names the shard its sort values are read from)`,
  );
}

/** `select` / `omit` of `args` with `fields` present in every row; `added` are stripped after the merge. */
function withFields(args: Obj, fields: readonly string[]): { selection: Obj; added: string[] } {
  const added: string[] = [];
  if (isObj(args.select)) {
    const select = { ...args.select };
    for (const f of fields)
      if (!select[f]) {
        select[f] = true;
        added.push(f);
      }
    return { selection: { select }, added };
  }
  if (isObj(args.omit)) {
    const omit = { ...args.omit };
    for (const f of fields)
      if (omit[f]) {
        omit[f] = false;
        added.push(f);
      }
    return { selection: { omit }, added };
  }
  return { selection: {}, added };
}

/**
 * The keyset filter without `{ field: null }` terms on required fields: they match nothing, and
 * Prisma refuses null for a required field.
 */
function dropNullTerms(filter: unknown, nullable: ReadonlySet<string>): unknown {
  if (Array.isArray(filter)) {
    return filter
      .filter((term) => {
        if (!isObj(term)) return true;
        const entries = Object.entries(term);
        return !(entries.length === 1 && entries[0]![1] === null && !nullable.has(entries[0]![0]));
      })
      .map((term) => dropNullTerms(term, nullable));
  }
  if (isObj(filter) && (Array.isArray(filter.OR) || Array.isArray(filter.AND))) {
    return Object.fromEntries(Object.entries(filter).map(([k, v]) => [k, dropNullTerms(v, nullable)]));
  }
  return filter;
}

function and(a: unknown, b: Obj | undefined): unknown {
  if (b === undefined) return a;
  if (a === undefined || (isObj(a) && Object.keys(a).length === 0)) return b;
  return { AND: [a, b] };
}

function addToRequest(request: AggregateRequest, kind: (typeof AGGREGATES)[number], field: string): void {
  const r = request as Record<string, unknown>;
  if (kind === "_count") {
    const current = request._count;
    r._count = current === true ? { _all: true, [field]: true } : { ...(current ?? {}), [field]: true };
  } else r[kind] = { ...((r[kind] as Obj | undefined) ?? {}), [field]: true };
}

/** A merged group with exactly the aggregates the caller asked for. */
function project(row: GroupRow, request: AggregateRequest): GroupRow {
  const out: Obj = { ...row };
  for (const kind of AGGREGATES) {
    const asked = request[kind];
    const value = out[kind];
    if (asked === undefined) delete out[kind];
    else if (asked === true) out[kind] = isObj(value) ? value._all : value;
    else if (isObj(value))
      out[kind] = Object.fromEntries(Object.entries(value).filter(([f]) => (asked as Obj)[f]));
  }
  return out as GroupRow;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
