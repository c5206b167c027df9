// Counting a router's load per logical shard, on the routed call's own path (arrays indexed by shard
// bits, no allocation beyond the call's own wrapper), and writing it to each database once per window.
import { createHmac } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Counter, Histogram } from "@opentelemetry/api";
import { ShardIdentifier } from "@shardkit/id";
import { withDeadline } from "../deadline.js";
import { DatabaseTimeoutError } from "../errors.js";
import { scalarValue } from "../keys/key-schema.js";
import { WRITES } from "../operations.js";
import type { ShardLayout } from "../planner.js";
import type { Telemetry } from "../telemetry.js";
import { type Batch, configDigest, copy, merge, routerId, type Sent, ShardCounts, sentOf } from "./batch.js";
import { HANDLER, Measured, rowsOf } from "./measured.js";
import type { ResolvedLoadOptions } from "./options.js";
import { Roller } from "./roller.js";
import { CREATE_LOAD_TABLE } from "./schema.js";
import { FLUSH_LOAD, type LoadRow, RESEND_FOR_MS } from "./sql.js";

type Raw = { $executeRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown> };

/** What the recorder needs of the routed client: where shards are, each database's client and name. */
export interface LoadTarget {
  layout: ShardLayout;
  databases: readonly { readonly client: object; readonly name: string }[];
  /** The key fields of a model (its routing keys, `id` first for ID-keyed models). */
  keysOf(model: string): readonly string[];
  telemetry?: Telemetry | undefined;
}

/** What one database's flush did (`$shardLoad().flush()`). */
export interface LoadFlushResult {
  database: string;
  /** `written`: the rows are in its table; `failed`: not known written (yet): sent again as they are next time, unless a statement that missed its deadline writes them late; `busy`: the previous flush to it has not answered yet (the windows since kept, merged). */
  status: "written" | "failed" | "busy";
  /** Shard windows sent (or kept). */
  rows: number;
  error?: unknown;
}

/**
 * The load of one routed client's calls: calls, writes, rows written, time in the database and a
 * latency sketch per logical shard, plus its heaviest routing keys; written every `intervalMs` to
 * `shardkit."ShardLoad"` on the database holding each shard, one statement per database.
 */
/** Windows younger than this are never deleted by a flush, whatever its router's `retainMs`. */
const MIN_RETAINED_MS = 3_600_000;

export class LoadRecorder {
  readonly router = routerId();
  readonly config: string;
  private slots: (ShardCounts | undefined)[] = new Array(1 << 14);
  private active: number[] = [];
  private windowStart = Date.now();
  private readonly batches: (Batch | undefined)[] = [];
  /** Per database, the batch sent and not yet known written (sent again as it is). */
  private readonly sent: (Sent | undefined)[] = [];
  private readonly lastStart: number[] = [];
  private readonly inFlight: (Promise<unknown> | undefined)[] = [];
  private readonly ensured: boolean[] = [];
  private readonly rollers: (Roller | undefined)[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  private readonly keyFields = new Map<string, readonly string[]>();
  private readonly metrics:
    | { duration: Histogram; dbTime: Counter; writes: Counter; rows: Counter; telemetry: Telemetry }
    | undefined;

  constructor(
    private readonly target: LoadTarget,
    /** Null: OpenTelemetry metrics only, nothing written to the databases. */
    readonly options: ResolvedLoadOptions | null,
    private readonly clock: () => number = Date.now,
    /** A clock that never steps (ms): how long a batch has been sent again is counted by it. */
    private readonly monotonic: () => number = () => performance.now(),
  ) {
    this.config = configDigest(
      target.layout,
      target.databases.map((d) => d.name),
    );
    const t = target.telemetry;
    this.metrics = t?.metering
      ? {
          telemetry: t,
          duration: t.histogram(
            "shardkit.shard.duration",
            "Time of routed calls in their database, by logical shard",
            "ms",
          ),
          dbTime: t.counter(
            "shardkit.shard.db_time",
            "Time spent in the database by routed calls, by logical shard (ms; a call over several shards split between them)",
          ),
          writes: t.counter("shardkit.shard.writes", "Routed write calls, by logical shard"),
          rows: t.counter(
            "shardkit.shard.rows_written",
            "Rows written by routed calls where known, by logical shard",
          ),
        }
      : undefined;
    this.windowStart = clock();
  }

  private readonly ones: (readonly ShardIdentifier[] | undefined)[] = [];

  /** `[shard]`, one array per shard (a transaction's calls count on its shard). */
  one(shard: ShardIdentifier): readonly ShardIdentifier[] {
    let list = this.ones[shard.bits];
    if (list === undefined) {
      list = [shard];
      this.ones[shard.bits] = list;
    }
    return list;
  }

  /** Whether anything is counted at all (load on, or telemetry metering). */
  static needed(options: ResolvedLoadOptions | null, telemetry: Telemetry | undefined): boolean {
    return options !== null || telemetry?.metering === true;
  }

  /**
   * `promise` (Prisma's lazy one, with its fluent methods) timed: the time from its first `then` to
   * its answer is counted on `shards` once it settles. `args`: a one-shard call's, whose routing key
   * value is counted among the heavy hitters (undefined for a call over several shards).
   */
  measure<T>(
    promise: PromiseLike<T>,
    shards: readonly ShardIdentifier[],
    model: string,
    operation: string,
    args?: unknown,
  ): PromiseLike<T> {
    const key = args === undefined ? undefined : this.keyOf(model, args);
    return new Proxy(
      new Measured(this, promise, shards, operation, key),
      HANDLER,
    ) as unknown as PromiseLike<T>;
  }

  /** `run()` (a statement shardkit awaits itself: a scatter leg), timed and counted on `shards`. */
  timed<T>(run: PromiseLike<T>, shards: readonly ShardIdentifier[], operation: string): Promise<T> {
    const start = performance.now();
    return Promise.resolve(run).then(
      (value) => {
        this.note(shards, operation, performance.now() - start, value, true, undefined);
        return value;
      },
      (error: unknown) => {
        this.note(shards, operation, performance.now() - start, undefined, false, undefined);
        throw error;
      },
    );
  }

  /** The routing key value of a one-shard call (its first key field with a plain value in `where` or `data`), as text. */
  keyOf(model: string, args: unknown): string | undefined {
    if (this.options === null || this.options.topKeys === 0) return undefined;
    let fields = this.keyFields.get(model);
    if (fields === undefined) {
      fields = this.target.keysOf(model);
      this.keyFields.set(model, fields);
    }
    const a = args as { where?: Record<string, unknown>; data?: unknown } | undefined;
    const where = a?.where;
    const data =
      a?.data !== null && typeof a?.data === "object" && !Array.isArray(a.data)
        ? (a.data as Record<string, unknown>)
        : undefined;
    for (let i = 0; i < fields.length; i++) {
      const f = fields[i]!;
      let v = where ? scalarValue(where[f]) : undefined;
      if (v === undefined && data) v = scalarValue(data[f]);
      if (v !== undefined) return typeof v === "string" ? v : String(v);
    }
    return undefined;
  }

  /** Counts one call that took `ms` on `shards` (its time split between them). */
  note(
    shards: readonly ShardIdentifier[],
    operation: string,
    ms: number,
    result: unknown,
    ok: boolean,
    key: string | undefined,
  ): void {
    const n = shards.length;
    if (n === 0) return;
    const write = WRITES.has(operation);
    const rows = ok && write ? rowsOf(operation, result) : 0;
    const share = ms / n;
    const persist = this.options !== null;
    for (let i = 0; i < n; i++) {
      const shard = shards[i]!;
      const rowsHere = rows === 0 ? 0 : Math.floor(rows / n) + (i < rows % n ? 1 : 0);
      if (persist) {
        let c = this.slots[shard.bits];
        if (c === undefined) {
          c = new ShardCounts(this.options!.topKeys);
          this.slots[shard.bits] = c;
        }
        if (c.calls === 0) this.active.push(shard.bits);
        c.calls++;
        if (write) {
          c.writes++;
          c.rows += rowsHere;
        }
        c.dbMs += share;
        c.sketch.record(ms);
        if (key !== undefined && n === 1 && c.top.k > 0) c.top.add(key);
      }
      const m = this.metrics;
      if (m) {
        const attributes = m.telemetry.shard(shard.key);
        m.duration.record(ms, attributes);
        m.dbTime.add(share, attributes);
        if (write) {
          m.writes.add(1, attributes);
          if (rowsHere > 0) m.rows.add(rowsHere, attributes);
        }
      }
    }
    if (persist && this.timer === undefined && !this.closed) this.start();
  }

  private start(): void {
    this.timer = setInterval(() => {
      void this.flush();
    }, this.options!.intervalMs);
    this.timer.unref?.();
  }

  /** The counts of the window so far, per shard key (not yet taken by a flush): for tests and the CLI. */
  current(): Map<string, { calls: number; writes: number; rowsWritten: number; dbMs: number }> {
    const out = new Map<string, { calls: number; writes: number; rowsWritten: number; dbMs: number }>();
    for (const bits of [...this.active].sort((x, y) => x - y)) {
      const c = this.slots[bits]!;
      out.set(ShardIdentifier.fromBits(bits).key, {
        calls: c.calls,
        writes: c.writes,
        rowsWritten: c.rows,
        dbMs: c.dbMs,
      });
    }
    return out;
  }

  /** Ends the window now: its counts join each database's batch, and the counting starts afresh. */
  private take(now: number): void {
    const start = this.windowStart;
    this.windowStart = now;
    const active = this.active;
    this.active = [];
    const { layout } = this.target;
    const name = this.name();
    for (const bits of active) {
      const c = this.slots[bits]!;
      let database: number;
      try {
        database = layout.databaseOf(layout.resolve(ShardIdentifier.fromBits(bits))).index;
      } catch {
        database = -1; // the shard is no longer registered: its counts have nowhere to go
      }
      if (database >= 0) {
        let batch = this.batches[database];
        if (batch === undefined) {
          batch = { start, end: now, rows: new Map() };
          this.batches[database] = batch;
        }
        batch.end = now;
        merge(
          batch.rows,
          bits,
          {
            calls: c.calls,
            writes: c.writes,
            rows: c.rows,
            dbMs: c.dbMs,
            sketch: copy(c.sketch),
            top: c.top.top(name),
          },
          this.options!.topKeys,
        );
      }
      c.calls = 0;
      c.writes = 0;
      c.rows = 0;
      c.dbMs = 0;
      c.sketch.clear();
      c.top.clear();
    }
  }

  /** How a key is named in `top`: itself (`plainKeys`) or a short keyed hash. */
  private name(): (key: string) => string {
    const o = this.options!;
    if (o.plainKeys) return (key) => key;
    return (key) => createHmac("sha256", o.keySalt).update(key).digest("hex").slice(0, 16);
  }

  /**
   * Ends the window and writes every database's batch: one statement each, in parallel, each
   * bounded by `deadlineMs`. A batch is sent as it is until a statement carrying it is known to have
   * ended well: one that failed, or did not answer in time and then failed, is sent again unchanged
   * under the same key at the next flush (counted once, whatever became of the first copy), while
   * the windows since wait, merged into one batch. Until a late statement ends, the database's
   * flushes answer `busy`. Never rejects.
   */
  async flush(): Promise<LoadFlushResult[]> {
    if (this.options === null) return [];
    const now = this.clock();
    this.take(now);
    const jobs: Promise<LoadFlushResult>[] = [];
    const n = Math.max(this.batches.length, this.sent.length);
    for (let database = 0; database < n; database++) {
      if (this.batches[database] || this.sent[database]) jobs.push(this.flushDatabase(database, now));
    }
    return Promise.all(jobs);
  }

  /** What is waiting for `database`: the batch sent and not yet known written, then the windows since. */
  private waiting(database: number): number {
    return (this.sent[database]?.rows.length ?? 0) + (this.batches[database]?.rows.size ?? 0);
  }

  private async flushDatabase(database: number, now: number): Promise<LoadFlushResult> {
    const name = this.target.databases[database]?.name ?? `database #${database}`;
    if (this.inFlight[database]) return { database: name, status: "busy", rows: this.waiting(database) };
    const o = this.options!;
    const cutoff = now - o.retainMs;
    const at = this.monotonic();
    let sent = this.sent[database];
    // Sent again only while a rollup remembers moving it (`RESEND_FOR_MS` from its first send) and unexpired.
    if (sent && (at - sent.firstSent > RESEND_FOR_MS || sent.start < cutoff)) {
      sent = undefined;
      this.sent[database] = undefined;
    }
    if (sent === undefined) {
      const batch = this.batches[database];
      if (batch === undefined) return { database: name, status: "failed", rows: 0 }; // given up
      this.batches[database] = undefined;
      if (batch.start < cutoff) return { database: name, status: "failed", rows: 0 }; // older than kept: expired
      // Its key, its start by this router's clock, never one of an earlier batch (two flushes in one ms).
      const last = this.lastStart[database] ?? Number.NEGATIVE_INFINITY;
      if (batch.start <= last) batch.start = last + 1;
      batch.end = Math.max(batch.end, batch.start);
      this.lastStart[database] = batch.start;
      sent = sentOf(batch, this.router, this.config, at);
      this.sent[database] = sent;
    }
    // The router's clock now: the database moves the windows by the difference from its own.
    const sentAt = new Date(now).toISOString();
    const client = this.target.databases[database]!.client as Raw;
    const json = JSON.stringify(sent.rows.map((r): LoadRow => ({ ...r, sent_at: sentAt })));
    // Any router's flush deletes windows: one with a short `retainMs` (a developer's machine pointed
    // at the fleet) would take every router's history; never the last hour's, what a balance reads.
    const cut = new Date(Math.min(cutoff, now - MIN_RETAINED_MS)).toISOString();
    const send = async () => {
      try {
        await client.$executeRawUnsafe(FLUSH_LOAD, json, cut);
      } catch (error) {
        if (this.ensured[database]) throw error;
        // The first flush here (or the table was dropped): make it, then send again.
        for (const ddl of CREATE_LOAD_TABLE) await client.$executeRawUnsafe(ddl);
        await client.$executeRawUnsafe(FLUSH_LOAD, json, cut);
      }
      this.ensured[database] = true;
    };
    const running = send();
    this.inFlight[database] = running;
    const batch = sent;
    running.then(
      () => {
        this.inFlight[database] = undefined;
        if (this.sent[database] === batch) this.sent[database] = undefined; // written, late or not
      },
      () => {
        // Kept as it is, sent again next time: its key finds any copy it left.
        this.inFlight[database] = undefined;
        this.ensured[database] = false;
      },
    );
    try {
      await withDeadline(
        o.deadlineMs,
        () =>
          new DatabaseTimeoutError(name, this.target.layout.databases[database]?.shards ?? [], o.deadlineMs),
        () => running,
      );
      Roller.of(this.rollers, database, client, o).after(now); // whichever router flushes rolls up
      return { database: name, status: "written", rows: batch.rows.length };
    } catch (error) {
      return { database: name, status: "failed", rows: batch.rows.length, error };
    }
  }

  /** Resolves once no flush statement nor rollup is in flight (a slow database's late answer included). */
  async idle(): Promise<void> {
    const settled = (p: Promise<unknown> | undefined) =>
      p?.then(
        () => {},
        () => {},
      );
    await Promise.all([...this.inFlight.map(settled), ...this.rollers.map((r) => r?.idle())]);
  }

  /** Stops the timer and flushes (a registry disconnecting); again if a batch sent again left windows waiting. */
  async close(): Promise<LoadFlushResult[]> {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    const first = await this.flush();
    const waiting = this.batches.some((b, d) => b !== undefined && !this.sent[d] && !this.inFlight[d]);
    if (!waiting) return first;
    const last = new Map(first.map((r) => [r.database, r]));
    for (const r of await this.flush()) last.set(r.database, r);
    return [...last.values()];
  }
}
