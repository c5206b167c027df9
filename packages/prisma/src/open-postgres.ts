// Opening PostgreSQL shards: a client per database behind a shut gate, the start-up checks (a
// database listed twice, a standby listed as a database, a replica that is not its database's
// standby, the connection budget), the schema to every database that answered, then the retry
// loops of `open-recovery.ts` for the others and the replicas.
import { checkInspected, type Inspected, inspect } from "./budget.js";
import { redactUrl, shardRegistryFromEnv } from "./config.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError, RegistryConfigError } from "./errors.js";
import { DatabaseGate } from "./gate.js";
import { type DatabaseState, type DatabaseStatus, shardHealth, summary } from "./health.js";
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
import type { Database, ShardClient, ShardReplica } from "./registry.js";
import { type RolloutTarget, rolloutSchema } from "./schema-rollout.js";

/** `openShards` on the PostgreSQL databases of `shardsJson` (see `openShards`). */
export async function openPostgres<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
  shardsJson: string,
): Promise<OpenShards<Client>> {
  const onProgress = options.onProgress ?? progressLine(logOf(options));
  const onState = options.onState ?? stateLine(logOf(options));
  const timeoutMs = positive(options.connectTimeoutMs, 5000, "connectTimeoutMs");
  const baseMs = positive(options.retry?.baseMs, 500, "retry.baseMs");
  const maxMs = Math.max(baseMs, positive(options.retry?.maxMs, 10_000, "retry.maxMs"));
  const budgetOptions = { onExceeded: options.connectionBudget ?? "error" } as const;
  const { PrismaPg } = await import("@prisma/adapter-pg");
  const made = new Map<ShardClient, { gate: DatabaseGate; target: RolloutTarget }>();
  const registry = shardRegistryFromEnv({
    env: { SHARDKIT_SHARDS: shardsJson },
    createClient: (url, shards, { pool, replicaOf }) => {
      const name = redactUrl(url);
      const gate = new DatabaseGate(name);
      const client = options.createClient(
        gate.wrap(new PrismaPg({ connectionString: url, max: pool })),
        replicaOf === undefined ? { name } : { name, replicaOf: redactUrl(replicaOf) },
      );
      const target = { name, adapter: new PrismaPg({ connectionString: url, max: 1 }), shards };
      made.set(client, { gate, target });
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
  /** Asks a database (or replica) past its gate, through a connection of its own, within `timeoutMs`: the first row. */
  const ask = <Row = Inspected>(on: { target: RolloutTarget }, sql: string): Promise<Row> =>
    withDeadline(
      timeoutMs,
      () => new DatabaseTimeoutError(on.target.name, on.target.shards ?? [], timeoutMs),
      async () => {
        const connection = await on.target.adapter.connect();
        try {
          const result = await connection.queryRaw({ sql, args: [], argTypes: [] });
          return Object.fromEntries(result.columnNames.map((c, i) => [c, result.rows[0]![i]])) as Row;
        } finally {
          await connection.dispose();
        }
      },
    );
  /** Asks a database who it is. */
  const query = (physical: Database<ShardClient>, sql: string) =>
    ask(databases.find((d) => d.physical === physical)!, sql);
  /** Asks a replica who it is. */
  const queryReplica = (replica: ShardReplica<ShardClient>, sql: string) =>
    ask(replicas.find((r) => r.replica === replica)!, sql);
  const rollout = (db: Opening, index: number, total: number) =>
    rolloutSchema({
      schema: options.schema,
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
    const reachable = databases.filter((d) => first.answered.some((a) => a.physical === d.physical));
    for (const [index, db] of reachable.entries()) {
      try {
        await rollout(db, index, reachable.length);
      } catch (error) {
        if (!unreachable(error)) throw error; // the first failure stops the rollout, as rolloutSchema's does
        set(db, "starting", error);
        continue;
      }
      db.gate.open();
      db.status = { ...db.status, state: "ready", since: new Date() };
    }
    for (const u of first.unreachable)
      set(databases.find((d) => d.physical === u.physical)!, "starting", u.error);
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
