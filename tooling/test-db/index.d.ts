// The types of index.js (see there); also every create-shardkit template's src/test/test-db.d.ts.
import type pg from "pg";
import type { TestProject } from "vitest/node";
/** The port of the main PostgreSQL server. */
/** How much busier than idle this machine is now: the load average per core, from 1 to 10. */
export declare function slowness(): number;
/** `ms` (a test's time limit, or a timeout given a server that is up) scaled by `slowness()`. */
export declare function patient(ms: number): number;
/** `promise`, or a failure naming `what` once `patient(ms)` has passed without it settling. */
export declare function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T>;
export declare const MAIN_PORT: number;
export declare function pgUrl(port: number, database: string): string;
/**
 * The extra PostgreSQL server a project's tests use: `SHARDKIT_TEST_CLUSTER` (`<name>:<port>`) when
 * set; else a cluster named after the project's package name, on a port derived from that name
 * (15000-19999), so that two projects on one machine each get their own. The port is the server's
 * where it is shared (`testDatabases({ shared: true })`); a server of a run's own (`ownCluster`, what
 * `testDatabases` makes otherwise) is `<name>_<pid>` on a free port.
 */
export declare function testCluster(
  packageName: string,
  env?: NodeJS.ProcessEnv,
): { cluster: string; port: number };
/** Thrown where this machine does not let the tests make PostgreSQL servers. */
export declare class ClustersUnavailableError extends Error {
  readonly code: "CLUSTERS_UNAVAILABLE";
  override readonly name: "ClustersUnavailableError";
}
/** Why the tests cannot make PostgreSQL servers here, or undefined when they can. */
export declare function whyNoClusters(env?: NodeJS.ProcessEnv): string | undefined;
/**
 * A PostgreSQL cluster `name` on 127.0.0.1:`port`, created if absent (trust auth, loopback only)
 * and started if down. `logical: true` gives it `wal_level = logical` (restarting it once if it
 * ran without); `maxConnections` sets its `max_connections` and `preload` its
 * `shared_preload_libraries` (e.g. `pg_stat_statements`), and `settings` any other server setting
 * (`{ max_prepared_transactions: 20 }`), the same way. `main` is the
 * machine's own server: only started, never created. Rejects with a ClustersUnavailableError
 * (for any other cluster) where `whyNoClusters()` gives a reason, and with an Error for a cluster
 * of that name these helpers did not make (they never change it).
 */
export declare function ensureCluster(
  name?: string,
  port?: number,
  options?: {
    logical?: boolean;
    maxConnections?: number;
    preload?: string[];
    /** Other server settings, e.g. `{ max_prepared_transactions: 20 }` (postgresql.conf names). */
    settings?: Record<string, string | number | boolean>;
  },
): Promise<number>;
/**
 * A streaming replica `name` on `port` of the running cluster on `primaryPort`, made afresh with
 * `pg_basebackup -R`; resolves once it streams (the primary's pg_stat_replication) as a standby.
 * Rejects with a ClustersUnavailableError where `whyNoClusters()` gives a reason.
 */
export declare function createStreamingReplica(
  name: string,
  port: number,
  options: { primaryPort: number; timeoutMs?: number },
): Promise<number>;
/** Waits until the standby on `port` has replayed the primary's WAL up to its position now. */
export declare function waitForReplay(port: number, primaryPort: number, timeoutMs?: number): Promise<void>;
/**
 * A setup's steps, undone if it fails part-way: `fn(step)` makes each thing through `step(made,
 * undo)`. Resolves to the teardown (every undo, in reverse order); when `fn` throws, what its steps
 * made is undone (in reverse order, once the steps it started have ended) before the error propagates.
 */
export declare function undoable(
  fn: (step: <T>(made: T | Promise<T>, undo: (made: T) => unknown) => Promise<T>) => Promise<unknown>,
): Promise<() => Promise<void>>;
/**
 * Clusters shared by concurrent test processes: the first user makes them, the last drops them (and
 * a make that fails is dropped). `clusters` names them: no other run may stop or freeze them.
 */
export declare function shareClusters(
  key: string,
  hooks: { clusters: string[]; make(): Promise<void>; drop(): Promise<void> },
): Promise<() => Promise<void>>;
/** One cluster shared by concurrent test processes: made (`ensureCluster`) by the first user, dropped by the last. */
export declare function shareCluster(
  name: string,
  port: number,
  options?: Parameters<typeof ensureCluster>[2],
): Promise<() => Promise<void>>;
/**
 * Stops and drops a cluster a test created, its configuration folder included. Never `main`, and
 * never a cluster these helpers did not make (rejects: `ensureCluster` refuses one too).
 */
export declare function dropCluster(name: string): Promise<void>;
/**
 * A port for a PostgreSQL server of a test's own: free now, not one of `taken`, and below the range
 * the system gives outgoing connections their local ports from, so none takes it while the server is
 * stopped.
 */
export declare function serverPort(taken?: Set<number>): Promise<number>;
/**
 * A server of this process's own (and its children's) for tests that stop or freeze it: cluster
 * `<base>_<pid>` (`_<n>` after it for the process's n-th server) on a free port, made here, shared
 * with no other run; `drop()` drops it. Servers of runs that ended without dropping theirs are
 * dropped first.
 */
export declare function ownCluster(
  base: string,
  options?: Parameters<typeof ensureCluster>[2],
): Promise<{ cluster: string; port: number; drop(): Promise<void> }>;
/** A streaming replica of this process's own (`createStreamingReplica`), named and dropped as `ownCluster`'s. */
export declare function ownReplica(
  base: string,
  options: { primaryPort: number; timeoutMs?: number },
): Promise<{ cluster: string; port: number; drop(): Promise<void> }>;
/**
 * Stops a cluster while `fn` runs, then starts it again. Refused for a cluster another test run uses
 * (made by `ownCluster` for another process, or shared through `shareClusters` with one outside this
 * process's line).
 */
export declare function withClusterStopped<T>(name: string, port: number, fn: () => Promise<T>): Promise<T>;
/** SIGSTOPs a cluster's server processes while `fn` runs (connections hang), then SIGCONTs them; refused as `withClusterStopped`. */
export declare function withClusterFrozen<T>(name: string, fn: () => Promise<T>): Promise<T>;
export declare function createDatabase(
  port: number,
  name: string,
  options?: { collation?: "C"; template?: string },
): Promise<string>;
export declare function dropDatabase(port: number, name: string): Promise<void>;
/**
 * The databases of a test run: `names` on the machine's server, `onServer` on `server` (a
 * `testCluster(...)`, made for the run, `wal_level = logical` when `logical`, dropped after it;
 * `shared`: with the project's other test processes, through `shareClusters`). Where no server may
 * be made, `skipped` says why and nothing is made, or with `fallback` the server's databases go on
 * the main server. `urls` in the order given (main's first); `drop()` drops what the run made.
 */
export declare function testDatabases(options: TestDatabasesOptions): Promise<TestDatabases>;
/** What `testDatabases` makes: databases on the main server and on `server`, and how. */
export interface TestDatabasesOptions {
  names?: string[];
  onServer?: string[];
  server?: { cluster: string; port: number };
  logical?: boolean;
  shared?: boolean;
  fallback?: boolean;
}
/** What `testDatabases` made: each database's URL, why the server was not made ("" when it was), `drop()`. */
export interface TestDatabases {
  urls: string[];
  skipped: string;
  /** The server of `onServer`: the run's own (`<server.cluster>_<pid>`, a free port) unless `shared`. */
  server: { cluster: string; port: number };
  drop(): Promise<void>;
}
/**
 * A service's shards for a test run (a vitest global setup): 0/0 and 0/1 on database a, 1/0 on b,
 * 1/1 on c on a server of the run's own named after `server` (on the main server where none may be
 * made: `skipped` says why), as SHARDKIT_SHARDS JSON; `server` the one used; `drop()` drops them.
 */
export declare function shardsOfRun(
  service: string,
  server: { cluster: string; port: number },
): Promise<{
  shardsJson: string;
  skipped: string;
  server: { cluster: string; port: number };
  drop(): Promise<void>;
}>;
/**
 * A Prisma schema file a project keeps as a copy of @shardkit/prisma's: the project's
 * `prisma/schema/<file>` and the installed `node_modules/@shardkit/prisma/schema/<file>`, as text.
 */
export declare function copiedSchema(projectDir: URL, file: string): { ours: string; upstream: string };
declare module "vitest" {
  export interface ProvidedContext {
    /** SHARDKIT_SHARDS JSON (`shardsOfRunSetup`): four shards in two groups on three databases, one on a second server. */
    shardsJson: string;
    /** Why the tests that stop or freeze the second server are skipped; "" when they run (`shardsOfRunSetup`). */
    secondSkipped: string;
    /** The run's own second server, which the tests stop and freeze (`shardsOfRunSetup`). */
    second: { cluster: string; port: number };
  }
}
/**
 * A service's vitest global setup (its `export default`): the run's shards (`shardsOfRun`) made
 * before the tests, given to them as `inject("shardsJson")`, `inject("second")` and
 * `inject("secondSkipped")`, and dropped after the last test.
 */
export declare function shardsOfRunSetup(
  service: string,
  server: { cluster: string; port: number },
): (project: TestProject) => Promise<() => Promise<void>>;
/** Every row of `model` (a Prisma client's model property, such as "wallet") on every database of a shard registry. */
export declare function everyRow<T>(
  registry: { databases: readonly { client: object }[] },
  model: string,
): Promise<T[]>;
/** An answer of `httpClient`'s `http`: the status, the body parsed from JSON, the headers. */
export interface HttpAnswer {
  status: number;
  /** The JSON body, parsed. */
  body: any;
  headers: Record<string, string | string[] | number | undefined>;
}
/**
 * A test's HTTP client of a Fastify app, over `inject`: `http(method, url, body?, key?, token?)`
 * sends `body` as JSON with an Idempotency-Key (default a new UUID) and a bearer `token` (default
 * the one given here); `null` sends no key or no credential.
 */
export declare function httpClient(
  app: {
    inject(request: {
      method: "GET" | "POST";
      url: string;
      headers: Record<string, string>;
      payload?: object | string;
    }): PromiseLike<{
      statusCode: number;
      json(): any;
      headers: Record<string, string | string[] | number | undefined>;
    }>;
  },
  options?: { token?: string | null },
): (
  method: "GET" | "POST",
  url: string,
  body?: unknown,
  key?: string | null,
  token?: string | null,
) => Promise<HttpAnswer>;
/**
 * Runs `node --import tsx <file>` in `cwd`, in a process group of its own, with `env` added to this
 * process's environment (a key set to undefined removed), and resolves to what it printed; the
 * group is killed when `signal` (the test's) aborts and when the program ends.
 */
export declare function runProgram(
  file: string,
  options?: { cwd?: string; env?: Record<string, string | undefined>; signal?: AbortSignal },
): Promise<string>;
/**
 * `fn` with a connection of its own to the database at `url`, closed after (also when `fn` throws),
 * so no test leaves a connection behind on a database it drops.
 */
export declare function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T>;
/** Where PgBouncer's binary is on this machine (Debian's `pgbouncer` package), or undefined. */
export declare function pgBouncerPath(): string | undefined;
/**
 * A PgBouncer of the test's own on 127.0.0.1 in front of the server on `targetPort` (every
 * database, user postgres, no authentication), in `mode` (default `transaction`) with at most
 * `poolSize` server connections per database, on a port the system picks (`port` of the result).
 * Resolves once it answers; `stop()` ends it (only it).
 */
export declare function startPgBouncer(options?: {
  targetPort?: number;
  poolSize?: number;
  mode?: "transaction" | "session";
}): Promise<{ port: number; url(database: string): string; stop(): Promise<void> }>;
