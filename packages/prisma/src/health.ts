import { scatter } from "@shardkit/scatter";
import { RoutingOptionsError } from "./errors.js";
import type { Database, ShardClient, ShardRegistry } from "./registry.js";

/**
 * A database's state in a service that opened it with `openShards`:
 * - `ready`: it answered, passed the start-up checks and has the schema;
 * - `starting`: it did not answer at start; retried (capped backoff) until it does and its schema
 *   is rolled out; its shards' requests fail as unavailable meanwhile;
 * - `refused`: it answered late but failed a check (the same database as another entry, over the
 *   connection budget, a rollout error); it stays refused until the service restarts.
 */
export type DatabaseState = "ready" | "starting" | "refused";

/** One database of `OpenShards.databases()`. */
export interface DatabaseStatus {
  name: string;
  /** Its logical shards' keys (a read replica's: its database's). */
  shards: string[];
  /** For a read replica: the name of the database it copies. */
  replicaOf?: string;
  state: DatabaseState;
  /** When it entered this state. */
  since: Date;
  /** Why it is not ready (the last error), when it is not. */
  error?: string;
  /** Times it was asked so far (1 for a database that answered at start). */
  attempts: number;
}

/** A shard's health: its database's state, probed now. */
export interface ShardHealth {
  shard: string;
  database: string;
  /**
   * `up`: its database answered the probe; `slow`: it has not answered within `timeoutMs` (a
   * busy or frozen server: not known to be down); `down`: the probe failed (refused, an error);
   * `starting` / `refused`: the database is not ready (see `DatabaseState`), not probed.
   */
  state: "up" | "slow" | "down" | "starting" | "refused";
  /** The probe's round trip, when it answered. */
  latencyMs?: number;
  error?: string;
}

export interface HealthReport {
  /** `ok`: every shard up; `down`: none up or slow (each failed or not ready); `degraded`: the rest. */
  status: "ok" | "degraded" | "down";
  shards: ShardHealth[];
}

export interface ShardHealthOptions {
  /** How long each database's probe may take. Default 1000 ms. */
  timeoutMs?: number;
  /** A database's state when it is not ready (from `openShards`); ready databases are probed. */
  stateOf?: (physical: Database<ShardClient>) => DatabaseStatus | undefined;
}

type Raw = { $queryRawUnsafe<T>(sql: string): Promise<T> };

/** Probes still running, per client: a database that hangs gets one probe at a time, not one per call. */
const running = new WeakMap<object, Promise<unknown>>();

/**
 * Probes every database of the registry at once (`SELECT 1`, bounded by `timeoutMs`) and reports
 * each logical shard's state. A database that hangs keeps its one probe running, and later calls
 * wait on that probe rather than taking another connection.
 */
export async function shardHealth<Client extends ShardClient>(
  registry: ShardRegistry<Client>,
  options: ShardHealthOptions = {},
): Promise<HealthReport> {
  const timeoutMs = options.timeoutMs ?? 1000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RoutingOptionsError([`shardHealth: timeoutMs must be a positive number, got ${timeoutMs}`]);
  }
  const probed = registry.databases.filter((p) => !notReady(options, p));
  const result = await scatter(
    probed,
    async (physical) => {
      const started = performance.now();
      let probe = running.get(physical.client);
      if (!probe) {
        probe = (physical.client as unknown as Raw).$queryRawUnsafe("SELECT 1").finally(() => {
          running.delete(physical.client);
        });
        running.set(physical.client, probe);
      }
      await probe;
      return performance.now() - started;
    },
    { policy: "partial", targetTimeoutMs: timeoutMs, key: (p) => p.name },
  );
  const shards: ShardHealth[] = [];
  for (const physical of registry.databases) {
    const status = notReady(options, physical);
    const at = probed.indexOf(physical);
    const outcome = at >= 0 ? result.outcomes[at] : undefined;
    for (const shard of physical.shards) {
      const entry: ShardHealth = { shard: shard.key, database: physical.name, state: "up" };
      if (status) {
        entry.state = status.state as "starting" | "refused";
        if (status.error !== undefined) entry.error = status.error;
      } else if (outcome?.status === "fulfilled") {
        entry.latencyMs = Math.round(outcome.value * 10) / 10;
      } else if (outcome?.reason === "timeout") {
        entry.state = "slow";
        entry.error = `did not answer within ${timeoutMs} ms`;
      } else {
        entry.state = "down";
        entry.error = summary(outcome?.error);
      }
      shards.push(entry);
    }
  }
  const up = shards.filter((s) => s.state === "up").length;
  // A slow answer is not an absent one: only shards that failed or are not ready make it "down".
  const alive = up + shards.filter((s) => s.state === "slow").length;
  return { status: up === shards.length ? "ok" : alive === 0 ? "down" : "degraded", shards };
}

function notReady(options: ShardHealthOptions, physical: Database<ShardClient>) {
  const status = options.stateOf?.(physical);
  return status && status.state !== "ready" ? status : undefined;
}

/**
 * An error in one line: the last line of its message (Prisma's says where it was called
 * first), or for a driver adapter's error what its cause says (`DatabaseDoesNotExist (db: x)`).
 */
export function summary(error: unknown): string {
  const cause = (error as { name?: unknown; cause?: Record<string, unknown> } | undefined)?.cause;
  if (
    (error as { name?: unknown })?.name === "DriverAdapterError" &&
    cause &&
    typeof cause.kind === "string"
  ) {
    const detail = Object.entries(cause)
      .filter(([key, value]) => key !== "kind" && value !== undefined)
      .map(([key, value]) => `${key}: ${String(value)}`)
      .join(", ");
    return `${cause.kind}${detail ? ` (${detail})` : ""}`.slice(0, 300);
  }
  const message = error instanceof Error ? error.message : String(error ?? "");
  const lines = message.split("\n").map((l) => l.trim());
  return (lines.filter((l) => l.length > 0).at(-1) ?? "failed").slice(0, 300);
}
