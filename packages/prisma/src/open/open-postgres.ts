// Opening PostgreSQL shards: a client per database behind a shut gate, the start-up checks (a
// database listed twice, a standby listed as a database, a replica that is not its database's
// standby, the connection budget), the schema to every database that answered, then the retry
// loops of `open-recovery.ts` for the others and the replicas.
import type { SqlDriverAdapter } from "@prisma/driver-adapter-utils";
import { atomicRefusals } from "../atomic-sql.js";
import { checkInspected, type Inspected, inspect } from "../budget.js";
import { redactUrl, shardRegistryFromEnv } from "../config.js";
import { withDeadline } from "../deadline.js";
import { DatabaseTimeoutError, RegistryConfigError, SchemaRolloutError } from "../errors.js";
import { DatabaseGate } from "../gate.js";
import { type DatabaseState, type DatabaseStatus, shardHealth, summary } from "../health.js";
import type { Database, ShardClient, ShardReplica } from "../registry.js";
import { type CheckedState, checkFingerprintOn } from "../schema/schema-fingerprint.js";
import {
  type RolloutTarget,
  rolloutFingerprint,
  rolloutSchema,
  runRollout,
} from "../schema/schema-rollout.js";
import { overSharedPool, type SharedPool } from "../shared-pool.js";
import { logOf, type OpenShards, type OpenShardsOptions, progressLine, stateLine } from "./open-options.js";
import {
  behind,
  notAReplica,
  type Opening,
  openReplica,
  type Recovery,
  type Replica,
  recover,
  unreachable,
} from "./open-recovery.js";
import { warmClients } from "./warm.js";

/**
 * `openShards` on the PostgreSQL databases of `shardsJson` (see `openShards`).
 * Longer than 80 lines: the open's stages (check, roll out, warm, recover) over one fleet state.
 */
export async function openPostgres<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
  shardsJson: string,
): Promise<OpenShards<Client>> {
  const onProgress = options.onProgress ?? progressLine(logOf(options));
  const onState = options.onState ?? stateLine(logOf(options));
  const timeoutMs = positive(options.connectTimeoutMs, 5000, "connectTimeoutMs");
  const idleTimeoutMillis = positive(options.idleTimeoutMs, 10_000, "idleTimeoutMs");
  const baseMs = positive(options.retry?.baseMs, 500, "retry.baseMs");
  const maxMs = Math.max(baseMs, positive(options.retry?.maxMs, 10_000, "retry.maxMs"));
  const concurrency = positive(options.rolloutConcurrency, 4, "rolloutConcurrency");
  if (!Number.isInteger(concurrency)) {
    throw new RegistryConfigError([`openShards: rolloutConcurrency must be an integer, got ${concurrency}`]);
  }
  const budgetOptions = { onExceeded: options.connectionBudget ?? "error" } as const;
  const { PrismaPg } = await import("@prisma/adapter-pg");
  const made = new Map<ShardClient, { gate: DatabaseGate; target: RolloutTarget; shared: SharedPool }>();
  const registry = shardRegistryFromEnv({
    env: { SHARDKIT_SHARDS: shardsJson },
    createClient: (url, shards, { pool, replicaOf }) => {
      const name = redactUrl(url);
      const gate = new DatabaseGate(name);
      // One pool per database: the client's engine, the start-up questions and the partition map's
      // statements (`pooledRaw`) share it, so an open starts no engine and opens one connection.
      const { client, pool: shared } = overSharedPool(
        new PrismaPg({ connectionString: url, max: pool, idleTimeoutMillis }),
        (adapter) =>
          options.createClient(
            adapter,
            replicaOf === undefined ? { name } : { name, replicaOf: redactUrl(replicaOf) },
          ),
        { name, gate },
      );
      // The schema engine's own connection, opened only for a push (a fingerprint that differs).
      const target = { name, adapter: new PrismaPg({ connectionString: url, max: 1 }), shards };
      made.set(client, { gate, target, shared });
      return client;
    },
  });
  const databases: Opening[] = registry.databases.map((physical) => ({
    physical,
    ...made.get(physical.client)!,
    status: {
      name: physical.name,
      shards: physical.shards.map((s) => s.key),
      state: "starting",
      since: new Date(),
      attempts: 1,
    },
  }));
  const replicas: Replica[] = databases.flatMap((of) =>
    of.physical.replicas.map((replica) => ({
      replica,
      of,
      ...made.get(replica.client)!,
      status: {
        name: replica.name,
        shards: of.status.shards,
        replicaOf: of.physical.name,
        state: "starting" as const,
        since: new Date(),
        attempts: 1,
      },
    })),
  );
  const stop = new AbortController();
  const set = (db: { status: DatabaseStatus }, state: DatabaseState, error?: unknown) => {
    const message = error === undefined ? undefined : summary(error);
    const changed = db.status.state !== state || db.status.error !== message;
    db.status = {
      ...db.status,
      state,
      since: db.status.state === state ? db.status.since : new Date(),
      ...(message === undefined ? {} : { error: message }),
    };
    if (message === undefined) delete db.status.error;
    if (changed) onState({ ...db.status });
  };
  /** The databases that answered so far, with what they said: a late one is checked against them. */
  const known: Recovery["known"] = [];
  /**
   * Asks a database (or replica) past its gate, through its client's pool (the connection its engine
   * takes later), within `timeoutMs`: the first row. `also` then runs through the same pool, on the
   * connection the question left idle (its failure is its own business).
   */
  const ask = <Row = Inspected>(
    on: { target: RolloutTarget; shared: SharedPool },
    sql: string,
    also?: (connection: SqlDriverAdapter) => Promise<void>,
  ): Promise<Row> =>
    withDeadline(
      timeoutMs,
      () => new DatabaseTimeoutError(on.target.name, on.target.shards ?? [], timeoutMs),
      async () => {
        const connection = await on.shared.connect();
        try {
          const result = await connection.queryRaw({ sql, args: [], argTypes: [] });
          await also?.(connection).catch(() => {});
          return Object.fromEntries(result.columnNames.map((c, i) => [c, result.rows[0]![i]])) as Row;
        } finally {
          await connection.dispose();
        }
      },
    );
  /**
   * The fingerprint this open's schema records, and each database's check of it made on the
   * connection that asked the database who it is (one connection per database at start, not two).
   * The rollout that follows takes a database's answer once, and only for that fingerprint.
   */
  const fingerprint = rolloutFingerprint({ schema: options.schema });
  fingerprint.catch(() => {}); // an unreadable schema fails the rollout itself, with its own error
  const prechecked = new Map<RolloutTarget, { fingerprint: string; state: CheckedState }>();
  /** Asks a database who it is, and checks its fingerprint through the same connection. */
  const query = (physical: Database<ShardClient>, sql: string) => {
    const db = databases.find((d) => d.physical === physical)!;
    prechecked.delete(db.target);
    return ask(db, sql, async (connection) => {
      const expected = await fingerprint;
      prechecked.set(db.target, {
        fingerprint: expected,
        state: await checkFingerprintOn(connection, expected),
      });
    });
  };
  /** Asks a replica who it is. */
  const queryReplica = (replica: ShardReplica<ShardClient>, sql: string) =>
    ask(replicas.find((r) => r.replica === replica)!, sql);
  /**
   * The schema for a database: the engine runs only where the fingerprint recorded by the last
   * rollout does not match (see `rolloutSchema`'s `skipUnchanged`). The check is the one made when
   * the database was asked who it is, or else one of its own with the open's deadline: a database
   * that does not answer it in time is not ready yet.
   */
  const schemaOptions = {
    schema: options.schema,
    skipUnchanged: true,
    checkWithin: (target: RolloutTarget, check: () => Promise<CheckedState>, expected: string) => {
      const known = prechecked.get(target);
      prechecked.delete(target);
      if (known?.fingerprint === expected) return Promise.resolve(known.state);
      return withDeadline(
        timeoutMs,
        () => new DatabaseTimeoutError(target.name, target.shards ?? [], timeoutMs),
        check,
      );
    },
  };
  /** Warms clients that are ready (see `OpenShardsOptions.warm`): none when `warm` is false. */
  const warm = (clients: readonly unknown[]) =>
    options.warm === false ? Promise.resolve(0) : warmClients(clients, timeoutMs);
  const rollout = (db: Opening, index: number, total: number) =>
    rolloutSchema({
      ...schemaOptions,
      targets: [db.target],
      onProgress: (event) => onProgress({ ...event, index, total }),
    });

  try {
    const [first, firstReplicas] = await Promise.all([
      inspect(
        databases.map((d) => d.physical),
        { timeoutMs, query },
      ),
      inspect(
        replicas.map((r) => r.replica),
        { timeoutMs, query: queryReplica },
      ),
    ]);
    const issues = [
      ...first.unreachable.filter((u) => !unreachable(u.error)),
      ...firstReplicas.unreachable.filter((u) => !unreachable(u.error) && !behind(u.error)),
    ].map((u) => `${u.physical.name}: ${summary(u.error)}`);
    for (const { physical, row } of first.answered) {
      if (row.standby) {
        issues.push(
          `${physical.name} is a standby (pg_is_in_recovery() is true): a database takes writes; list a standby under its database's replicas`,
        );
      }
    }
    for (const { physical, row } of firstReplicas.answered) {
      const rep = replicas.find((r) => r.replica === physical)!;
      const why = notAReplica(rep, row, first.answered.find((a) => a.physical === rep.of.physical)?.row);
      if (why) issues.push(why);
    }
    if (issues.length > 0) throw new RegistryConfigError(issues);
    // Before any schema change: one database listed twice, or a budget that cannot hold, is a
    // configuration error. Replicas' pools count on their own servers.
    checkInspected(
      { answered: first.answered, unreachable: [], replicas: firstReplicas.answered },
      budgetOptions,
    );
    known.push(...first.answered);
    const { warning } = atomicRefusals(
      first.answered.map((a) => ({ name: a.physical.name, prepared: Number(a.row.prepared) })),
    );
    if (warning) (options.onWarning ?? logOf(options))(warning);
    // The schema to every database that answered: all fingerprints checked at once (bounded), then
    // the engine on those that differ, `concurrency` at a time. A database that stops answering
    // meanwhile is left starting (its retries roll the schema out); any other failure stops the
    // rollout (no further database starts) and fails the open, as rolloutSchema's does.
    const reachable = databases.filter((d) => first.answered.some((a) => a.physical === d.physical));
    const { report, failure, errors } = await runRollout({
      ...schemaOptions,
      targets: reachable.map((d) => d.target),
      concurrency,
      unreachable,
      onProgress,
    });
    for (const [index, db] of reachable.entries()) {
      const entry = report.targets[index]!;
      if (entry.status === "failed" && unreachable(errors.get(index))) set(db, "starting", errors.get(index));
      else if (entry.status === "applied" || entry.status === "unchanged") {
        db.gate.open();
        db.status = { ...db.status, state: "ready", since: new Date() };
      }
    }
    if (report.targets.some((t, i) => t.status === "failed" && !unreachable(errors.get(i)))) {
      throw new SchemaRolloutError(report, failure);
    }
    for (const u of first.unreachable)
      set(databases.find((d) => d.physical === u.physical)!, "starting", u.error);
    await warm(databases.filter((d) => d.status.state === "ready").map((d) => d.physical.client));
  } catch (error) {
    await registry.disconnect();
    throw error;
  }

  const recovery: Recovery = {
    stop: stop.signal,
    baseMs,
    maxMs,
    timeoutMs,
    budgetOptions,
    known,
    set,
    ask,
    query,
    rollout,
    warm: (client) => warm([client]),
  };
  const waiting = databases.filter((d) => d.status.state === "starting");
  const loops = waiting.map((db) => recover(db, recovery));
  const replicaLoops = replicas.map((rep) => openReplica(rep, recovery));
  const everything = [...databases, ...replicas];
  const ready = Promise.all([...loops, ...replicaLoops]).then(() => {
    if (stop.signal.aborted && everything.some((d) => d.status.state !== "ready"))
      return new Promise<void>(() => {});
    const refused = everything.find((d) => d.status.state === "refused");
    if (refused) throw new RegistryConfigError([`${refused.status.name}: ${refused.status.error}`]);
  });
  ready.catch(() => {}); // a refusal is also reported through onState: nobody has to await `ready`
  return {
    registry,
    describe: databases.map((d) => d.target.name).join(", "),
    databases: () => everything.map((d) => ({ ...d.status })),
    ready,
    health: (health) =>
      shardHealth(registry, {
        ...health,
        stateOf: (physical) => databases.find((d) => d.physical === physical)?.status,
      }),
    async close() {
      stop.abort();
      await Promise.all([...loops, ...replicaLoops]);
      await registry.disconnect();
    },
  };
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(Number.isFinite(value) && value > 0)) {
    throw new RegistryConfigError([`openShards: ${name} must be a positive number, got ${value}`]);
  }
  return value;
}
