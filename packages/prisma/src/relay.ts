import { ShardedUUID } from "@shardkit/id";
import { scatter } from "@shardkit/scatter";
import { decodeJson } from "./codec.js";
import type { OutboxMessage } from "./outbox.js";
import type { PhysicalShard, ShardClient, ShardRegistry } from "./registry.js";

export interface OutboxRelayOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /**
   * Delivers one event (publish it, call a handler, ...). Resolving marks it delivered; throwing
   * schedules a retry with backoff. Delivery is at least once: a relay that dies mid-batch leaves
   * its events pending, and they are delivered again, so consumers must be idempotent.
   */
  deliver(message: OutboxMessage): Promise<void>;
  /** Events claimed per database per poll. Default 100. */
  batchSize?: number;
  /** After this many failed deliveries an event is moved to the dead-letter state. Default 10. */
  maxAttempts?: number;
  /** Retry delay: `baseMs * 2^(attempts-1)`, capped at `maxMs`. Defaults 500 ms and 60 s. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** Pause between polls when `start()`ed and a poll found nothing. Default 1000 ms. */
  pollIntervalMs?: number;
  /** Longest time one database's batch may hold its claim (transaction). Default 60 s. */
  batchTimeoutMs?: number;
  /** Receives poll failures of a database (e.g. its server is down) while `start()`ed. */
  onError?(error: unknown, shards: string): void;
}

/** What one poll did on one physical database. */
export interface RelayDatabaseReport {
  /** Keys of the logical shards that database holds, e.g. "1/0,1/1". */
  shards: string;
  claimed: number;
  delivered: number;
  retried: number;
  dead: number;
}

export interface RelayPollReport {
  databases: RelayDatabaseReport[];
  /** Databases that could not be polled, and why. */
  missing: { shards: string; error: unknown }[];
}

export interface OutboxLag {
  shards: string;
  pending: number;
  dead: number;
  /** Age of the oldest pending event in ms (0 when none). */
  oldestPendingMs: number;
}

export interface OutboxRelay {
  /** Polls every database once, in parallel, and delivers what it claimed. */
  runOnce(): Promise<RelayPollReport>;
  /** Polls until `stop()`. */
  start(): void;
  /** Stops polling and waits for the poll in flight. */
  stop(): Promise<void>;
  /** Pending and dead events and the oldest pending event's age, per database. */
  lag(): Promise<OutboxLag[]>;
}

type Raw = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};
type Interactive = {
  $transaction<R>(fn: (tx: Raw) => Promise<R>, options?: { timeout?: number; maxWait?: number }): Promise<R>;
};
type Row = {
  id: string;
  topic: string;
  aggregateId: string;
  payload: string;
  createdAt: Date;
  attempts: number;
};

// Claims are row locks held by the batch's transaction: a second relay skips them (SKIP LOCKED),
// and a relay that dies releases them when its connection drops.
const CLAIM = `SELECT id::text AS id, topic, "aggregateId"::text AS "aggregateId", payload, "createdAt", attempts
  FROM "OutboxEvent" WHERE status = 'pending' AND "availableAt" <= now()
  ORDER BY "createdAt", id LIMIT $1 FOR UPDATE SKIP LOCKED`;
const DELIVERED = `UPDATE "OutboxEvent" SET status = 'delivered', "deliveredAt" = now(), attempts = attempts + 1 WHERE id = $1::uuid`;
const FAILED = `UPDATE "OutboxEvent" SET attempts = attempts + 1, "lastError" = $2, status = $3,
  "availableAt" = now() + ($4::int * interval '1 millisecond') WHERE id = $1::uuid`;
const LAG = `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
  count(*) FILTER (WHERE status = 'dead')::int AS dead,
  coalesce(extract(epoch FROM now() - min("createdAt") FILTER (WHERE status = 'pending')) * 1000, 0)::float8 AS oldest
  FROM "OutboxEvent"`;

/** A relay that polls every shard database's outbox in parallel and delivers each event at least once. */
export function createOutboxRelay<Client extends ShardClient>(
  options: OutboxRelayOptions<Client>,
): OutboxRelay {
  const batchSize = options.batchSize ?? 100;
  const maxAttempts = options.maxAttempts ?? 10;
  const baseMs = options.backoff?.baseMs ?? 500;
  const maxMs = options.backoff?.maxMs ?? 60_000;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const batchTimeoutMs = options.batchTimeoutMs ?? 60_000;
  const databases = options.registry.physical;
  const nameOf = (p: PhysicalShard<Client>) => p.shards.map((s) => s.key).join(",");

  async function pollDatabase(physical: PhysicalShard<Client>): Promise<RelayDatabaseReport> {
    const report: RelayDatabaseReport = {
      shards: nameOf(physical),
      claimed: 0,
      delivered: 0,
      retried: 0,
      dead: 0,
    };
    const client = physical.client as unknown as Interactive;
    await client.$transaction(
      async (tx) => {
        const rows = await tx.$queryRawUnsafe<Row[]>(CLAIM, batchSize);
        report.claimed = rows.length;
        for (const row of rows) {
          const message: OutboxMessage = {
            id: row.id,
            topic: row.topic,
            aggregateId: row.aggregateId,
            payload: decodeJson(row.payload),
            createdAt: row.createdAt,
            attempts: row.attempts,
            shard: ShardedUUID.shardOf(row.id),
          };
          try {
            await options.deliver(message);
            await tx.$executeRawUnsafe(DELIVERED, row.id);
            report.delivered++;
          } catch (error) {
            const attempts = row.attempts + 1;
            const dead = attempts >= maxAttempts;
            const delay = Math.min(maxMs, baseMs * 2 ** (attempts - 1));
            const text = error instanceof Error ? error.message : String(error);
            await tx.$executeRawUnsafe(FAILED, row.id, text.slice(0, 2000), dead ? "dead" : "pending", delay);
            if (dead) report.dead++;
            else report.retried++;
          }
        }
      },
      { timeout: batchTimeoutMs, maxWait: batchTimeoutMs },
    );
    return report;
  }

  async function runOnce(): Promise<RelayPollReport> {
    const result = await scatter(databases, (physical) => pollDatabase(physical), {
      policy: "partial",
      key: (physical) => nameOf(physical),
    });
    return {
      databases: result.values,
      missing: result.missing.map((m) => ({ shards: m.key, error: m.error })),
    };
  }

  let running: Promise<void> | undefined;
  let stopping = false;
  let wake: (() => void) | undefined;

  async function loop(): Promise<void> {
    while (!stopping) {
      const report = await runOnce();
      for (const m of report.missing) options.onError?.(m.error, m.shards);
      const busy = report.databases.some((d) => d.claimed === batchSize);
      if (!busy && !stopping) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollIntervalMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    }
  }

  return {
    runOnce,
    start() {
      if (running) return;
      stopping = false;
      running = loop().finally(() => {
        running = undefined;
      });
    },
    async stop() {
      stopping = true;
      wake?.();
      await running;
    },
    async lag() {
      const result = await scatter(
        databases,
        async (physical) => {
          const [row] = await (physical.client as unknown as Raw).$queryRawUnsafe<
            { pending: number; dead: number; oldest: number }[]
          >(LAG);
          return {
            shards: nameOf(physical),
            pending: row!.pending,
            dead: row!.dead,
            oldestPendingMs: Math.round(row!.oldest),
          };
        },
        { key: (physical) => nameOf(physical) },
      );
      return result.values;
    },
  };
}
