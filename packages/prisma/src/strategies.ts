import type { ShardIdentifier } from "@shardkit/id";
import { withDeadline } from "./deadline.js";
import { DirectoryUnavailableError, NotInDirectoryError } from "./errors.js";
import type { ShardRef } from "./registry.js";

/**
 * How a key field that is not a ShardedUUID names its shard. A string in `models.X.keys` is a
 * ShardedUUID field; these route other columns:
 * - `byColumn(field, shardOf)`: a function of the value, such as a selector's
 *   `(tenantId) => selector.select({ tenantId })`. Synchronous, no lookup.
 * - `byHash(field, shards)`: the frozen rendezvous hash of the value over a list of shards
 *   (`shardHash` of @shardkit/id). Adding a shard to the list moves about 1/(n+1) of the values
 *   (to the new shard only).
 * - `byDirectory(field, directory)`: an asynchronous lookup (a table, a service), cached.
 */
export type RoutedKey = ColumnKey | HashKey | DirectoryKey;

export interface ColumnKey {
  by: "column";
  field: string;
  shardOf(value: unknown): ShardRef;
}

export interface HashKey {
  by: "hash";
  field: string;
  shards: readonly ShardRef[];
}

export interface DirectoryKey {
  by: "directory";
  field: string;
  directory: ShardDirectory;
}

/** A lookup from a key's value to its shard, with the cache the router keeps of its answers. */
export interface ShardDirectory {
  /** How errors name it. Default: `directory of <field>`. */
  name?: string;
  /**
   * The shard of a value; null or undefined when the directory does not know it. `signal` aborts
   * when the lookup is given up (`timeoutMs`): pass it on to the request that asks.
   */
  lookup(
    value: string,
    options: { signal: AbortSignal },
  ): Promise<ShardRef | null | undefined> | ShardRef | null | undefined;
  /**
   * How long a lookup may take (ms); one that has not answered by then is a directory that is down
   * (see `staleMs`), never a value it does not know. Default 10 000.
   */
  timeoutMs?: number;
  /** How long an answer is used without asking again (ms). Default 60 000. */
  ttlMs?: number;
  /**
   * When a lookup fails (the directory is down), an answer at most this old (ms) is still used;
   * with none, the requests of that value fail with `DirectoryUnavailableError`. Default 3 600 000.
   */
  staleMs?: number;
  /** Answers kept; the least recently used go first. Default 100 000. */
  maxEntries?: number;
}

/** A key routed by a function of its value (the selector fits): `byColumn("tenantId", (t) => selector.select({ tenantId: t }))`. */
export function byColumn(field: string, shardOf: (value: unknown) => ShardRef): ColumnKey {
  return { by: "column", field, shardOf };
}

/** A key routed by a frozen rendezvous hash of its value over `shards`. */
export function byHash(field: string, shards: readonly ShardRef[]): HashKey {
  return { by: "hash", field, shards };
}

/** A key routed by a directory lookup, cached (see `ShardDirectory`). */
export function byDirectory(field: string, directory: ShardDirectory): DirectoryKey {
  return { by: "directory", field, directory };
}

/** A cached directory: fresh answers are read synchronously; the rest are looked up. */
export class DirectoryCache {
  readonly name: string;
  private readonly entries = new Map<string, { shard: ShardIdentifier; at: number }>();
  private readonly ttlMs: number;
  private readonly staleMs: number;
  private readonly maxEntries: number;
  private readonly timeoutMs: number;
  private readonly inflight = new Map<string, Promise<ShardIdentifier>>();

  constructor(
    private readonly directory: ShardDirectory,
    field: string,
    private readonly resolve: (shard: ShardRef) => ShardIdentifier,
    private readonly now: () => number = Date.now,
  ) {
    this.name = directory.name ?? `directory of ${field}`;
    this.ttlMs = directory.ttlMs ?? 60_000;
    this.staleMs = directory.staleMs ?? 3_600_000;
    this.maxEntries = directory.maxEntries ?? 100_000;
    this.timeoutMs = directory.timeoutMs ?? 10_000;
  }

  /** The shard of a fresh answer, or undefined. */
  fresh(value: string): ShardIdentifier | undefined {
    const entry = this.entries.get(value);
    return entry && this.now() - entry.at < this.ttlMs ? entry.shard : undefined;
  }

  /** Asks the directory (one request per value at a time); a failure falls back to a stale answer. */
  lookup(value: string): Promise<ShardIdentifier> {
    let pending = this.inflight.get(value);
    if (!pending) {
      pending = this.ask(value).finally(() => this.inflight.delete(value));
      this.inflight.set(value, pending);
    }
    return pending;
  }

  private async ask(value: string): Promise<ShardIdentifier> {
    let answer: ShardRef | null | undefined;
    let failure: DirectoryUnavailableError | undefined;
    let late: DirectoryUnavailableError | undefined;
    try {
      answer = await withDeadline(
        this.timeoutMs,
        () => (late = new DirectoryUnavailableError(this.name, value, undefined, this.timeoutMs)),
        (signal) => Promise.resolve().then(() => this.directory.lookup(value, { signal })),
      );
    } catch (error) {
      failure =
        late !== undefined && error === late ? late : new DirectoryUnavailableError(this.name, value, error);
    }
    if (failure) {
      const entry = this.entries.get(value);
      if (entry && this.now() - entry.at < this.staleMs) return entry.shard;
      throw failure;
    }
    if (answer === null || answer === undefined) {
      this.entries.delete(value);
      throw new NotInDirectoryError(this.name, value);
    }
    const shard = this.resolve(answer);
    this.entries.delete(value);
    this.entries.set(value, { shard, at: this.now() });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return shard;
  }
}

/** Which IDs are not ShardedUUIDs and live on a declared shard (see `LegacyIds`). */
export interface Legacy {
  shard: ShardIdentifier;
  /** UUIDv7 IDs made before this time (ms) are legacy too. */
  before: number | undefined;
}

/**
 * Where rows whose IDs are not ShardedUUIDs live: a shard (`"0/0"`), or `{ shard, uuidv7Before }`
 * when the app's existing IDs are plain UUIDv7 (they cannot be told from sharded ones by form, so by
 * time: IDs made before the cut-over are legacy).
 */
export type LegacyIds = ShardRef | { shard: ShardRef; uuidv7Before?: Date };
