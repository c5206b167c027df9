// What `openShards` takes and gives back, and its default lines for people (a database's state,
// a schema rollout done). Shared by the PostgreSQL and the embedded (PGlite) ways of opening.
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { ShardIdentifier } from "@shardkit/id";
import type { DatabaseStatus, HealthReport, ProbeOptions } from "../health.js";
import type { LoadOption } from "../load/options.js";
import type { ShardClient, ShardRegistry } from "../registry.js";
import type { RolloutEvent } from "../schema/schema-rollout.js";

export interface OpenShardsOptions<Client extends ShardClient> {
  /**
   * The Prisma schema (file or folder) every database gets, pushed at open. A database whose
   * fingerprint (recorded by the last rollout there: this schema, the engine's version, and its
   * schema unchanged since) matches is not pushed again: one cheap statement instead of the schema
   * engine (its report says `fingerprint: 'matched'`). `shardkit rollout` pushes to every database.
   */
  schema: string;
  /** How many databases whose fingerprint does not match are pushed at once. Default 4. */
  rolloutConcurrency?: number;
  /**
   * Builds the client of one database from its driver adapter: `(adapter) => new PrismaClient({ adapter })`.
   * Called for each read replica too, with `database.replicaOf` naming the database it copies.
   */
  createClient(
    adapter: SqlMigrationAwareDriverAdapterFactory,
    database: { name: string; replicaOf?: string },
  ): Client;
  /**
   * The shards as JSON in the `SHARDKIT_SHARDS` format (`[{ group, member, url, replicas? }]` or
   * `{ shards, databases?, defaultShard?, unknownShard? }`): real PostgreSQL through `@prisma/adapter-pg`.
   * When absent (undefined), `embedded` is used; set but blank is an error, never a fallback.
   * Read replicas (`replicas: [url]`) get no schema (they copy their database's): each opens once
   * it is a standby of its database that has replayed the database's schema; until then, and
   * whenever it is down, its reads go to the database itself.
   */
  shardsJson?: string | undefined;
  /** Embedded PGlite: one database per shard under `dataDir` (needs `@electric-sql/pglite` and `pglite-prisma-adapter`). */
  embedded?: { dataDir: string; shards: readonly ShardIdentifier[] };
  /**
   * What an open does when the pools (`pool` per entry of `shardsJson`, default 10) of the
   * databases on one server add up to more than its `max_connections` allows: `'error'` (default)
   * throws `ConnectionBudgetError` naming the server and every pool; `'warn'` logs it.
   */
  connectionBudget?: "error" | "warn";
  /**
   * How long the open waits for each database's first answer (ms). A database that does not answer
   * in time, or is down, does not stop the open: it is `starting` (see `databases()`), its shards'
   * calls fail as unavailable, and it is retried until it answers, passes the checks and has the
   * schema. Default 5000.
   */
  connectTimeoutMs?: number;
  /**
   * How long a connection of a database's pool may stay idle before it is closed (ms). A router
   * holds connections only to the databases it uses (and, for this long after the open, the one
   * each pool opened for the open's questions, which the warm-up reuses: see `warm`), and none once
   * they idle this long. Serverless: `pool: 1`
   * in the configuration, `warm: false` and a short value here. Default 10000 (node-postgres' own).
   */
  idleTimeoutMs?: number;
  /**
   * Whether the open warms each database's client before it resolves (PostgreSQL only): one
   * `SELECT 1` through it, 16 databases at a time, each within `connectTimeoutMs`, which starts its
   * engine on the connection the open's questions left in its pool (the open's questions, and a
   * partition map's statements, go through the pool without the engine: one connection per
   * database in all), open until it idles `idleTimeoutMs`. The first
   * calls then reuse these connections: at 64 databases they take a fraction of the time they take
   * cold (packages/prisma/README.md). A database that becomes ready later (it was down at start),
   * and a read replica once it opens, is warmed then. `false`: an engine starts on its database's
   * first call (serverless functions that call few of many databases). Default true.
   */
  warm?: boolean;
  /** Backoff between the retries of a `starting` database (doubling, capped). Default 500 ms to 10 s. */
  retry?: { baseMs?: number; maxMs?: number };
  /**
   * Where the lines for people go (`schema 2/4 shard 0/1: applied`, `shards 1/1 on b: starting, ...`,
   * a version warning) when `onProgress`, `onState` or `onWarning` is not given. Default: stderr.
   */
  log?: (line: string) => void;
  /** Schema rollout progress. Default: one line per database (`log`). */
  onProgress?: (event: RolloutEvent) => void;
  /** A database changed state or, while starting, failed again with another error. Default: a line (`log`). */
  onState?: (status: DatabaseStatus) => void;
  /**
   * What is worth a warning at start-up: the app's `prisma`, `@prisma/client` and
   * `@prisma/adapter-pg` not on one version (`prismaVersionWarning`). Default: a line (`log`).
   */
  onWarning?: (message: string) => void;
  /**
   * The default `load` of every `shardRouting` on the registry returned (see
   * `ShardRoutingOptions.load`): `false` turns load counting off, `{ intervalMs, ... }` tunes it.
   * `close()` flushes each router's last window before it disconnects.
   */
  load?: LoadOption;
}

export interface OpenShards<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Where the data lives, for people: the embedded folder or the (password-less) URLs. */
  describe: string;
  /** Each database's state now (`ready`, `starting`, `refused`), in registry order. */
  databases(): DatabaseStatus[];
  /**
   * Resolves once every database is ready; rejects with the check's error when one is refused.
   * Never settles while a database stays down: race it with a deadline where that matters.
   */
  ready: Promise<void>;
  /**
   * Each shard's and database's health now: ready databases are probed (`probeDatabase`: `SELECT 1`,
   * or their connection counts with `connections`, bounded), the others give their state.
   */
  health(options?: ProbeOptions): Promise<HealthReport>;
  /** Stops retrying databases, disconnects every client (and closes embedded databases). */
  close(): Promise<void>;
}

/** Where `openShards`' lines go: `options.log`, or stderr. */
export function logOf(options: { log?: ((line: string) => void) | undefined }): (line: string) => void {
  return options.log ?? ((line) => process.stderr.write(`${line}\n`));
}

/** A database's state as a line for people. */
export const stateLine =
  (log: (line: string) => void) =>
  (status: DatabaseStatus): void => {
    const detail = status.error ? ` (${status.error})` : "";
    if (status.replicaOf !== undefined) {
      const next =
        status.state === "ready" ? "ready" : `${status.state}; its reads go to ${status.replicaOf} meanwhile`;
      log(`replica ${status.name} of ${status.replicaOf}: ${next}${detail}`);
    } else {
      const next =
        status.state === "starting"
          ? ": starting, not answering yet; its shards answer 503 until it does"
          : `: ${status.state}`;
      log(`shards ${status.shards.join(", ")} on ${status.name}${next}${detail}`);
    }
  };

/** A database's schema rollout as lines for people: before the engine runs on it, and once done. */
export const progressLine =
  (log: (line: string) => void) =>
  (event: RolloutEvent): void => {
    if (event.type === "start") {
      if (event.applying) log(`schema ${event.index + 1}/${event.total} ${event.target}: applying`);
      return;
    }
    const matched = event.report.fingerprint === "matched" ? " (fingerprint matched)" : "";
    log(`schema ${event.index + 1}/${event.total} ${event.target}: ${event.report.status}${matched}`);
  };
