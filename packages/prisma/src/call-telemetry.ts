// A routed call's telemetry: its span (started when the call is awaited, with its plan's shard
// and database) and the `shardkit.calls` counter, per logical shard.
import type { AsyncLocalStorage } from "node:async_hooks";
import type { Attributes, Span } from "@opentelemetry/api";
import type { Placed } from "./place.js";
import type { Plan } from "./plan.js";
import { ATTR, type Telemetry, tracedLazy } from "./telemetry.js";

/** The telemetry of one routed client's calls. */
export class CallTelemetry {
  constructor(
    readonly telemetry: Telemetry,
    /** The span of the routed call the current async context runs in. */
    private readonly spans: AsyncLocalStorage<Span>,
    private readonly databaseName: (index: number) => string | undefined,
    /** Where a plan's shards are now (see `Executor.place`). */
    private readonly place: (plan: Exclude<Plan, { kind: "refuse" }>) => Placed,
  ) {}

  /**
   * Prisma's lazy promise, traced: the span starts when the call is awaited (with `plan`'s
   * attributes; a plan made after lookups sets them later), ends when it settles.
   */
  traced(
    promise: PromiseLike<unknown>,
    plan: Plan | undefined,
    model: string,
    operation: string,
  ): PromiseLike<unknown> {
    const telemetry = this.telemetry;
    return tracedLazy(
      promise,
      () => {
        const attributes = this.attributesOf(plan, model, operation);
        if (telemetry.metering && plan) this.countCall(telemetry, plan);
        if (!telemetry.tracing()) return undefined;
        return telemetry.startSpan(`shardkit ${model}.${operation}`, attributes);
      },
      (span, run) => (span ? this.spans.run(span, run) : run()),
    );
  }

  /** The span attributes of a call with `plan` (undefined: planned later, after a lookup). */
  attributesOf(plan: Plan | undefined, model: string, operation: string): Attributes {
    const attributes: Attributes = {
      [ATTR.system]: "postgresql",
      [ATTR.operation]: operation,
      [ATTR.collection]: model,
    };
    if (plan) this.annotate(attributes, plan);
    return attributes;
  }

  /**
   * `shardkit.plan` (`shard`, `database`: one statement on one database, `scatter`: a merged
   * read, `split`: a write over several databases, `refuse`), and the shard(s) and database of a
   * call on one database, as the plan is placed now.
   */
  private annotate(attributes: Attributes, plan: Plan): void {
    if (plan.kind === "refuse") {
      attributes[ATTR.plan] = plan.kind;
      return;
    }
    const { shape, targets } = this.place(plan);
    attributes[ATTR.plan] = shape;
    const one = shape === "shard" || shape === "database" ? targets[0]! : undefined;
    if (plan.kind === "shard") attributes[ATTR.shard] = plan.shard.key;
    else if (one) attributes[ATTR.shards] = one.shards.map((s) => s.key);
    const name = one && this.databaseName(one.database);
    if (name !== undefined) attributes[ATTR.database] = name;
  }

  /** Sets a plan made after a lookup on the current call's span. */
  noteLookup(plan: Plan): void {
    const telemetry = this.telemetry;
    if (!telemetry.on()) return;
    if (telemetry.metering) this.countCall(telemetry, plan);
    const span = this.spans.getStore();
    if (!span) return;
    const attributes: Attributes = {};
    this.annotate(attributes, plan);
    span.setAttributes(attributes);
  }

  /** `shardkit.calls`: one per logical shard a routed call runs on. */
  private countCall(telemetry: Telemetry, plan: Plan): void {
    const counter = telemetry.counter("shardkit.calls", "Routed calls, by logical shard");
    if (plan.kind === "shard") counter.add(1, telemetry.shard(plan.shard.key));
    else if (plan.kind === "shards" && !plan.write)
      for (const s of plan.spread.shards) counter.add(1, telemetry.shard(s.key));
  }
}
