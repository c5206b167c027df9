// A routed call, timed: Prisma's lazy promise (with its fluent methods) behind a Proxy whose
// `then` starts the clock; and what a write's answer says it wrote.
import { performance } from "node:perf_hooks";
import type { ShardIdentifier } from "@shardkit/id";

/** What a measured call reports to (the recorder). */
export interface Noter {
  note(
    shards: readonly ShardIdentifier[],
    operation: string,
    ms: number,
    result: unknown,
    ok: boolean,
    key: string | undefined,
  ): void;
}

/** Rows a write's answer says it wrote: `count` of the *Many writes, the rows returned, 1 for a single-row write. */
export function rowsOf(operation: string, result: unknown): number {
  switch (operation) {
    case "createMany":
    case "updateMany":
    case "deleteMany": {
      const count = (result as { count?: unknown } | null)?.count;
      return typeof count === "number" ? count : 0;
    }
    case "createManyAndReturn":
    case "updateManyAndReturn":
      return Array.isArray(result) ? result.length : 0;
    default:
      return 1;
  }
}

/** A measured call: Prisma's lazy promise, timed from its first `then`. */
export class Measured {
  private settled: Promise<unknown> | undefined;
  constructor(
    readonly recorder: Noter,
    readonly promise: PromiseLike<unknown>,
    readonly shards: readonly ShardIdentifier[],
    readonly operation: string,
    readonly key: string | undefined,
  ) {}

  get(): Promise<unknown> {
    if (this.settled) return this.settled;
    const start = performance.now();
    this.settled = (this.promise as Promise<unknown>).then(
      (value) => {
        this.recorder.note(this.shards, this.operation, performance.now() - start, value, true, this.key);
        return value;
      },
      (error: unknown) => {
        this.recorder.note(
          this.shards,
          this.operation,
          performance.now() - start,
          undefined,
          false,
          this.key,
        );
        throw error;
      },
    );
    return this.settled;
  }
}

/** One handler for every measured call: `then`/`catch`/`finally` time it; the rest is Prisma's (fluent methods). */
export const HANDLER: ProxyHandler<Measured> = {
  get(m, prop) {
    switch (prop) {
      case "then":
        return (a?: (v: unknown) => unknown, b?: (e: unknown) => unknown) => m.get().then(a, b);
      case "catch":
        return (b?: (e: unknown) => unknown) => m.get().catch(b);
      case "finally":
        return (f?: () => void) => m.get().finally(f);
    }
    const value = Reflect.get(m.promise as object, prop);
    return typeof value === "function" ? value.bind(m.promise) : value;
  },
  has: (m, prop) => prop in (m.promise as object),
};
