import {
  type Attributes,
  type Context,
  type Counter,
  context,
  createNoopMeter,
  type Histogram,
  type Meter,
  type MeterProvider,
  metrics,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";

/** The name (and instrumentation scope) shardkit's tracers and meters use. */
export const TELEMETRY_SCOPE = "@shardkit/prisma";
const VERSION = "0.1.0";

/**
 * OpenTelemetry for a routed client, a relay or a move, through `@opentelemetry/api` only.
 * - omitted or `true` (default): the global providers of `@opentelemetry/api`; with no SDK
 *   registered every span is skipped before it is made (one provider check per call) and metrics
 *   go to the API's no-op meter.
 * - `false`: no instrumentation at all (not even that check).
 * - `{ tracerProvider?, meterProvider? }`: these providers (each defaults to the global one).
 * Meters are taken when the client (relay, move) is made: register the SDK before.
 */
export type TelemetryOption =
  | boolean
  | { tracerProvider?: TracerProvider | undefined; meterProvider?: MeterProvider | undefined }
  | undefined;

/** The tracer provider the API hands out when no SDK is registered. */
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();
const NOOP_METER = createNoopMeter();

/** Attribute names (semantic conventions for databases, and shardkit's own). */
export const ATTR = {
  system: "db.system.name",
  operation: "db.operation.name",
  collection: "db.collection.name",
  shard: "shardkit.shard",
  shards: "shardkit.shards",
  database: "shardkit.database",
  plan: "shardkit.plan",
  complete: "shardkit.scatter.complete",
  missing: "shardkit.scatter.missing",
} as const;

/** The instruments of one routed client, relay or move. Made only when telemetry is not `false`. */
export class Telemetry {
  private readonly tracer: Tracer;
  /** True when the spans go to a provider given explicitly: then every call is traced. */
  private readonly explicit: boolean;
  readonly meter: Meter;
  /** Whether the meter is a real one (not the API's no-op). */
  readonly metering: boolean;
  private counters = new Map<string, Counter>();
  private histograms = new Map<string, Histogram>();
  private readonly shardAttributes = new Map<string, Attributes>();

  constructor(option: Exclude<TelemetryOption, false>, scope = TELEMETRY_SCOPE) {
    const given = typeof option === "object" ? option : {};
    this.explicit = given.tracerProvider !== undefined;
    this.tracer = (given.tracerProvider ?? trace).getTracer(scope, VERSION);
    this.meter = (given.meterProvider ?? metrics.getMeterProvider()).getMeter(scope, VERSION);
    this.metering = this.meter !== NOOP_METER;
  }

  /** Whether spans would be recorded: a provider was given, or the global one is not the no-op. */
  tracing(): boolean {
    if (this.explicit) return true;
    const provider = trace.getTracerProvider();
    const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
    return delegate !== NOOP_TRACER_PROVIDER;
  }

  /** Whether a call needs instrumenting at all. */
  on(): boolean {
    return this.metering || this.tracing();
  }

  startSpan(name: string, attributes: Attributes, parent?: Span, kind: SpanKind = SpanKind.CLIENT): Span {
    const ctx: Context = parent ? trace.setSpan(context.active(), parent) : context.active();
    return this.tracer.startSpan(name, { kind, attributes }, ctx);
  }

  counter(name: string, description: string): Counter {
    let c = this.counters.get(name);
    if (!c) {
      c = this.meter.createCounter(name, { description });
      this.counters.set(name, c);
    }
    return c;
  }

  histogram(name: string, description: string, unit: string): Histogram {
    let h = this.histograms.get(name);
    if (!h) {
      h = this.meter.createHistogram(name, { description, unit });
      this.histograms.set(name, h);
    }
    return h;
  }

  /** `{ "shardkit.shard": key }`, one object per shard. */
  shard(key: string): Attributes {
    let a = this.shardAttributes.get(key);
    if (!a) {
      a = { [ATTR.shard]: key };
      this.shardAttributes.set(key, a);
    }
    return a;
  }
}

/** The instruments for `option`, or undefined for `telemetry: false`. */
export function telemetryOf(option: TelemetryOption, scope?: string): Telemetry | undefined {
  return option === false ? undefined : new Telemetry(option, scope);
}

/** Ends `span` with `error` recorded as its status. */
export function endWithError(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
  span.end();
}

/** Runs `run` in a span: ended when it settles, error status when it throws. */
export async function inSpan<R>(span: Span | undefined, run: () => Promise<R>): Promise<R> {
  if (!span) return run();
  try {
    const result = await run();
    span.end();
    return result;
  } catch (error) {
    endWithError(span, error);
    throw error;
  }
}

/**
 * Wraps a lazy promise (Prisma's, with its fluent methods) so that `start` runs when it is first
 * awaited and `end` when it settles. Every other property (`.wallets()`, ...) is Prisma's own.
 */
export function tracedLazy<T>(
  promise: PromiseLike<T>,
  start: () => Span | undefined,
  inside: <R>(span: Span | undefined, run: () => R) => R,
): PromiseLike<T> {
  let settled: Promise<T> | undefined;
  const get = (): Promise<T> => {
    if (settled) return settled;
    const span = start();
    settled = inside(span, () =>
      Promise.resolve(promise).then(
        (value) => {
          span?.end();
          return value;
        },
        (error: unknown) => {
          if (span) endWithError(span, error);
          throw error;
        },
      ),
    );
    return settled;
  };
  return new Proxy(promise as object, {
    get(target, prop) {
      switch (prop) {
        case "then":
          return (a?: (v: T) => unknown, b?: (e: unknown) => unknown) => get().then(a, b);
        case "catch":
          return (b?: (e: unknown) => unknown) => get().catch(b);
        case "finally":
          return (f?: () => void) => get().finally(f);
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as PromiseLike<T>;
}
