// One pool per database, shared by its client's engine and by the statements shardkit sends past the
// engine: `openShards`' start-up questions and the partition map's statements. Those run through
// the driver adapter (its `pg` pool), so opening a service and its map starts no Prisma engine (the
// query compiler's construction, 5-8 ms a database) and opens one connection per database, which
// the engine then reuses (its first call, or the warm-up). See docs/scaling.md ("Opening maps").
import {
  ColumnTypeEnum,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
  type SqlResultSet,
  type Transaction,
} from "@prisma/driver-adapter-utils";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError } from "./errors.js";
import type { DatabaseGate } from "./gate.js";

/**
 * A driver adapter factory's one adapter (one pool), handed out to every taker: the client's engine
 * (`factory`) and shardkit's own statements (`connect`). No connection is opened before a statement.
 * A taker's `dispose` leaves the pool open: `end` closes it (the registry's `disconnect`, after its
 * clients').
 */
export class SharedPool {
  private adapter: Promise<SqlDriverAdapter> | undefined;

  constructor(private readonly base: SqlMigrationAwareDriverAdapterFactory) {}

  /** An adapter over the one pool (made at the first taker's call); its `dispose` leaves the pool open. */
  async connect(): Promise<SqlDriverAdapter> {
    this.adapter ??= this.base.connect().catch((error: unknown) => {
      this.adapter = undefined;
      throw error;
    });
    const shared = await this.adapter;
    const view: SqlDriverAdapter = {
      provider: shared.provider,
      adapterName: shared.adapterName,
      queryRaw: (query) => shared.queryRaw(query),
      executeRaw: (query) => shared.executeRaw(query),
      executeScript: (script) => shared.executeScript(script),
      startTransaction: (level) => shared.startTransaction(level),
      dispose: async () => {},
    };
    const info = shared.getConnectionInfo;
    if (info) view.getConnectionInfo = () => info.call(shared);
    return view;
  }

  /** The factory to give the client: each of its connects takes the one pool. */
  get factory(): SqlMigrationAwareDriverAdapterFactory {
    return {
      provider: this.base.provider,
      adapterName: this.base.adapterName,
      connect: () => this.connect(),
      connectToShadowDb: () => this.base.connectToShadowDb(),
    };
  }

  /** Closes the pool (its connections); a later taker opens a new one. */
  async end(): Promise<void> {
    const adapter = this.adapter;
    this.adapter = undefined;
    await (await adapter?.catch(() => undefined))?.dispose();
  }
}

/** Each client made over a shared pool: the pool, and the gate its engine's statements pass. */
const pools = new WeakMap<object, { pool: SharedPool; name: string; gate: DatabaseGate | undefined }>();

/**
 * `make`'s client over one shared pool made from `factory`: its engine takes the pool (behind
 * `gate`, if any), and `pooledRaw(client)` sends statements through the same pool (behind the same
 * gate) without starting the engine. The registry's `disconnect` closes the pool after the client.
 * `name`: how a late transaction names the database.
 */
export function overSharedPool<Client extends object>(
  factory: SqlMigrationAwareDriverAdapterFactory,
  make: (factory: SqlMigrationAwareDriverAdapterFactory) => Client,
  options: { name: string; gate?: DatabaseGate },
): { client: Client; pool: SharedPool } {
  const pool = new SharedPool(factory);
  const { name, gate } = options;
  const client = make(gate ? gate.wrap(pool.factory) : pool.factory);
  pools.set(client, { pool, name, gate });
  return { client, pool };
}

/** Closes the shared pool of `client`, if it has one (after the client's own `$disconnect`). */
export function endSharedPool(client: object): Promise<void> {
  return pools.get(client)?.pool.end() ?? Promise.resolve();
}

/** What `pooledRaw` answers: Prisma's raw statements and interactive transactions, without the engine. */
export interface PooledRaw {
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $transaction<R>(
    fn: (tx: PooledRaw) => Promise<R>,
    options?: { timeout?: number; maxWait?: number },
  ): Promise<R>;
}

/**
 * Raw statements on `client`'s database through its shared pool (see `overSharedPool`), behind its
 * gate, without starting its engine; undefined for a client made otherwise. Rows come back as
 * Prisma's `$queryRawUnsafe` gives them for the types shardkit reads (`bigint` as BigInt, `json`
 * parsed, timestamps as Date; `numeric` stays text); errors are the driver adapter's
 * (`DriverAdapterError`, PostgreSQL's code and DETAIL in its `cause`).
 */
export function pooledRaw(client: object): PooledRaw | undefined {
  const shared = pools.get(client);
  if (!shared) return undefined;
  const adapter = async () => {
    const view = await shared.pool.connect();
    return shared.gate ? shared.gate.guard(view) : view;
  };
  return {
    $queryRawUnsafe: async <T>(sql: string, ...values: unknown[]) =>
      rowsOf((await adapter()).queryRaw(query(sql, values))).catch(worded) as Promise<T>,
    $executeRawUnsafe: async (sql, ...values) =>
      (await adapter()).executeRaw(query(sql, values)).catch(worded),
    $transaction: async (fn, options) => transaction(await adapter(), shared.name, fn, options).catch(worded),
  };
}

/**
 * The driver adapter's error, rethrown with words where it has only its kind (`TableDoesNotExist`,
 * `DatabaseNotReachable`): PostgreSQL's own message, or the server it could not reach, as Prisma's
 * engine would say it. Its `cause` (PostgreSQL's code, DETAIL) is left as it is.
 */
function worded(error: unknown): never {
  const cause = (error as { cause?: Record<string, unknown> } | null)?.cause;
  if (error instanceof Error && cause && error.message === cause.kind) {
    if (typeof cause.originalMessage === "string") error.message = cause.originalMessage;
    else if (cause.kind === "DatabaseNotReachable") {
      const at = [cause.host, cause.port].filter((v) => v !== undefined).join(":");
      error.message = `Can't reach database server${at ? ` at ${at}` : ""}`;
    }
  }
  throw error;
}

function query(sql: string, values: readonly unknown[]) {
  return {
    sql,
    args: [...values],
    argTypes: values.map(() => ({ scalarType: "unknown" as const, arity: "scalar" as const })),
  };
}

/** Prisma's interactive transaction on one connection of the pool: `maxWait` to begin, `timeout` in all. */
async function transaction<R>(
  adapter: SqlDriverAdapter,
  database: string,
  fn: (tx: PooledRaw) => Promise<R>,
  options: { timeout?: number; maxWait?: number } = {},
): Promise<R> {
  const { timeout = 5000, maxWait = 2000 } = options;
  const begun = adapter.startTransaction();
  const late = (ms: number) => new DatabaseTimeoutError(database, [], ms);
  const tx: Transaction = await withDeadline(
    maxWait,
    () => {
      // Begun after all: rolled back, never left holding a connection.
      begun.then((t) => end(t, "ROLLBACK")).catch(() => {});
      return late(maxWait);
    },
    () => begun,
  );
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
  }, timeout);
  timer.unref?.();
  const live = <T>(run: () => Promise<T>) => (expired ? Promise.reject(late(timeout)) : run());
  const inTx: PooledRaw = {
    $queryRawUnsafe: <T>(sql: string, ...values: unknown[]) =>
      live(() => rowsOf(tx.queryRaw(query(sql, values))) as Promise<T>),
    $executeRawUnsafe: (sql, ...values) => live(() => tx.executeRaw(query(sql, values))),
    $transaction: (inner) => live(() => inner(inTx)),
  };
  let ending = false;
  try {
    const result = await fn(inTx);
    if (expired) throw late(timeout);
    ending = true;
    await end(tx, "COMMIT");
    return result;
  } catch (error) {
    // A COMMIT that failed gave its connection back already: nothing left to roll back on it.
    if (!ending) await end(tx, "ROLLBACK").catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Ends a transaction begun through the driver adapter: its statement, then the connection given back. */
async function end(tx: Transaction, how: "COMMIT" | "ROLLBACK"): Promise<void> {
  try {
    await tx.executeRaw({ sql: how, args: [], argTypes: [] });
  } finally {
    await (how === "COMMIT" ? tx.commit() : tx.rollback());
  }
}

/** A result set as rows of named columns, each value as Prisma's raw queries give it (see `pooledRaw`). */
async function rowsOf(answer: Promise<SqlResultSet>): Promise<Record<string, unknown>[]> {
  const { columnNames, columnTypes, rows } = await answer;
  return rows.map((row) =>
    Object.fromEntries(columnNames.map((name, i) => [name, prismaValue(row[i], columnTypes[i]!)])),
  );
}

function prismaValue(value: unknown, type: number): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case ColumnTypeEnum.Int64:
      return BigInt(value as string | number);
    case ColumnTypeEnum.Json:
      return typeof value === "string" ? JSON.parse(value) : value;
    case ColumnTypeEnum.DateTime:
    case ColumnTypeEnum.Date:
      return new Date(value as string);
    case ColumnTypeEnum.Int64Array:
    case ColumnTypeEnum.JsonArray:
    case ColumnTypeEnum.DateTimeArray:
    case ColumnTypeEnum.DateArray:
      return (value as unknown[]).map((v) =>
        prismaValue(v, type - (ColumnTypeEnum.Int32Array - ColumnTypeEnum.Int32)),
      );
    default:
      return value;
  }
}
