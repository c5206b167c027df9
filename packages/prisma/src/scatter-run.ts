// Runs a read merged over the databases holding its shards (a plan with a `read`, placed): its prepare step, one bounded statement per
// database in parallel, the exact merge, the report of what is missing, and their telemetry.
import type { AsyncLocalStorage } from "node:async_hooks";
import type { Attributes, Span } from "@opentelemetry/api";
import { type ScatterResult, scatter } from "@shardkit/scatter";
import { DatabaseTimeoutError } from "./errors.js";
import type { LoadRecorder } from "./load/recorder.js";
import type { Obj, PlanTarget, ScatterRead } from "./plan.js";
import { type Planner, targetKey } from "./planner.js";
import { isPrismaValidationError } from "./prisma-private.js";
import { LegDeadlines } from "./scatter/deadlines.js";
import type { ScatterReadOptions, ScatterReport, ScatterTargetReport } from "./scatter/options.js";
import type { Call, View } from "./scope.js";
import { ATTR, endWithError, type Telemetry } from "./telemetry.js";
import { isShardUnavailable } from "./unavailable.js";

/** What running a scatter needs of the executor (`Executor` is one). */
export interface ScatterRunner {
  readonly planner: Planner;
  readonly telemetry?: Telemetry | undefined;
  readonly spans: AsyncLocalStorage<Span>;
  /** Per `Model.field`, whether it may hold null (asked once). */
  readonly nullable: Map<string, boolean>;
  readonly call: Call;
  databaseName(index: number): string | undefined;
  /** How long one statement shardkit sends may wait for its database (a leg's deadline). */
  readonly timeoutMs: number;
  bounded<T>(database: number, run: () => PromiseLike<T>): Promise<T>;
  /** Load per logical shard: each leg counts on the shards it holds. */
  readonly load?: LoadRecorder | undefined;
  /** Runs a read on database `database` (its client, or a replica of it). */
  on(view: View, database: number, model: string, operation: string, args: unknown): PromiseLike<unknown>;
}

// Longer than 80 lines: the plan's legs, their deadline and the merge, in the order they run.
export async function runScatter(
  r: ScatterRunner,
  view: View,
  model: string,
  operation: string,
  targets: PlanTarget[],
  planned: ScatterRead,
  options: ScatterReadOptions,
): Promise<unknown> {
  let read = planned;
  if (read.prepare) {
    const step = read.prepare;
    let row: Obj | null = null;
    let database = targets[0]!.database;
    if (step.row) {
      const { layout } = r.planner;
      database = layout.databaseOf(layout.resolve(step.row.shard)).index;
      const lookup = step.row.lookup;
      row = (await r.bounded(database, () =>
        r.on(view, database, model, "findUnique", lookup),
      )) as Obj | null;
    }
    const nullable = new Set<string>();
    if (row || !step.row) {
      for (const field of step.fields) {
        if (row?.[field] === null || (await isNullable(r, view, database, model, field))) nullable.add(field);
      }
    }
    const next = step.resume(row, nullable);
    if (next === null) return finish(r, view, model, read, read.merge([]), () => targets);
    read = next;
  }
  const current = read;
  // A database that is down or slow is missing; a database that refuses the query itself (bad
  // input that reached it, a constraint) fails the whole read with its own error, as one database
  // would: a client must not be able to pass its own mistake off as an outage.
  let refused: { error: unknown } | undefined;
  const parent = r.telemetry ? r.spans.getStore() : undefined;
  // Nothing a leg is asked depends on its database but its target's args: the args of a keyless
  // read (the same object for every target) are made once and shared by every leg, and an `in`
  // list cut per database gets its own. Prisma neither keeps nor changes the args it is given.
  const asked = new Map<Obj, Obj>();
  const argsOf = (target: PlanTarget): Obj => {
    let args = asked.get(target.args);
    if (args === undefined) {
      args = current.argsFor(target);
      asked.set(target.args, args);
    }
    return args;
  };
  // Each leg bounded by `timeoutMs` (as `bounded` bounds one statement), one timer for all of them.
  const deadlines = new LegDeadlines(
    r.timeoutMs,
    (database) => {
      const shards = r.planner.layout.databases[database]?.shards ?? [];
      return new DatabaseTimeoutError(r.databaseName(database) ?? `#${database}`, shards, r.timeoutMs);
    },
    (error) => {
      if (!refused && !isShardUnavailable(error)) refused = { error };
    },
  );
  const result = await scatter(
    targets,
    (target): Promise<unknown> => {
      const { database } = target;
      const load = r.load;
      const run = load
        ? () =>
            load.timed(
              r.on(view, database, model, current.operation, argsOf(target)),
              target.shards,
              current.operation,
            )
        : () => r.on(view, database, model, current.operation, argsOf(target));
      if (!parent) return deadlines.run(database, run);
      // Telemetry on: a child span per database (none is made, nor anything else per leg, when off).
      const child = scatterChild(r, parent, model, current.operation, target);
      return deadlines.run(database, run).then(
        (value) => {
          child.end();
          return value;
        },
        (error: unknown) => {
          endWithError(child, error);
          throw error;
        },
      );
    },
    {
      policy: options.policy ?? "fail",
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}),
      key: targetKey,
      // A Prisma query cannot be cancelled once sent: no AbortSignal per leg.
      abortable: false,
    },
  ).catch((error: unknown) => {
    throw refused ? refused.error : error;
  });
  if (refused) throw refused.error;
  if (r.telemetry) noteScatter(r, parent, result);
  const merged = current.merge(result.values);
  if (options.onReport) options.onReport(report(model, operation, result));
  return finish(r, view, model, current, merged, () => {
    const answered = result.outcomes.filter((o) => o.status === "fulfilled").map((o) => o.target);
    return answered.length > 0 ? answered : targets;
  });
}

/** A scatter's child span for one database. */
function scatterChild(
  r: ScatterRunner,
  parent: Span,
  model: string,
  operation: string,
  target: PlanTarget,
): Span {
  const attributes: Attributes = {
    [ATTR.system]: "postgresql",
    [ATTR.operation]: operation,
    [ATTR.collection]: model,
    [ATTR.shards]: target.shards.map((s) => s.key),
  };
  const name = r.databaseName(target.database);
  if (name !== undefined) attributes[ATTR.database] = name;
  return r.telemetry!.startSpan(
    `shardkit ${model}.${operation} ${name ?? target.database}`,
    attributes,
    parent,
  );
}

/** Completeness on the scatter's span, an event per missing database, and `shardkit.scatter.misses`. */
function noteScatter(
  r: ScatterRunner,
  parent: Span | undefined,
  result: ScatterResult<PlanTarget, unknown>,
): void {
  const telemetry = r.telemetry!;
  const missing = result.outcomes.filter((o) => o.status === "missing");
  parent?.setAttributes({
    [ATTR.complete]: result.complete,
    [ATTR.missing]: missing.flatMap((o) => o.target.shards.map((s) => s.key)),
  });
  for (const o of missing) {
    const name = r.databaseName(o.target.database) ?? String(o.target.database);
    const reason = String(o.reason);
    parent?.addEvent("shardkit.scatter.missing", {
      [ATTR.database]: name,
      [ATTR.shards]: o.target.shards.map((s) => s.key),
      "shardkit.reason": reason,
    });
    if (telemetry.metering) {
      telemetry
        .counter("shardkit.scatter.misses", "Databases missing from a scatter's answer")
        .add(1, { [ATTR.database]: name, "shardkit.reason": reason });
    }
  }
}

/** A `findFirstOrThrow` that found nothing raises Prisma's own not-found error, from a database that answered. */
function finish(
  r: ScatterRunner,
  view: View,
  model: string,
  read: { orThrow?: boolean },
  merged: unknown,
  answered: () => readonly PlanTarget[],
): unknown {
  if (merged !== null || !read.orThrow) return merged;
  return boundedCall(r, view, answered()[0]!.database, model, "findFirstOrThrow", {
    where: { id: { in: [] } },
  });
}

/**
 * Whether a scalar field may hold null. Prisma's runtime data model does not say, and Prisma
 * refuses `{ field: null }` for a required field, so ask once per field (a query that matches
 * nothing; a required field fails Prisma's validation before reaching the database).
 */
async function isNullable(
  r: ScatterRunner,
  view: View,
  database: number,
  model: string,
  field: string,
): Promise<boolean> {
  const key = `${model}.${field}`;
  let known = r.nullable.get(key);
  if (known === undefined) {
    try {
      await boundedCall(r, view, database, model, "findFirst", {
        where: { AND: [{ [field]: null }, { id: { in: [] } }] },
        select: { id: true },
      });
      known = true;
    } catch (error) {
      if (!isPrismaValidationError(error)) throw error;
      known = false;
    }
    r.nullable.set(key, known);
  }
  return known;
}

function report(model: string, operation: string, result: ScatterResult<PlanTarget, unknown>): ScatterReport {
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
  return {
    model,
    operation,
    complete: result.complete,
    missing,
    missingShards: missing.flatMap((t) => t.shards).sort((a, b) => a.bits - b.bits),
    targets,
    durationMs: result.durationMs,
  };
}

/** `call` on database `database`'s own client, bounded: a statement shardkit sends itself. */
function boundedCall(
  r: ScatterRunner,
  view: View,
  database: number,
  model: string,
  operation: string,
  args: unknown,
): Promise<unknown> {
  return r.bounded(database, () => r.call(view.clients[database]!, model, operation, args));
}
