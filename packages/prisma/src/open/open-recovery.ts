// What an open does about a database that was not ready at start, and about read replicas: the
// retry loops (a database until it answers, passes the checks and has the schema, or is refused; a
// replica until its database is ready and it has replayed the schema), and the checks they share
// with the open itself (is it a standby of its database, is its error one that waiting may cure).
import {
  type ConnectionBudgetOptions,
  checkInspected,
  INSPECT,
  type Inspected,
  type Inspection,
  inspect,
} from "../budget.js";
import { RegistryConfigError } from "../errors.js";
import type { DatabaseGate } from "../gate.js";
import type { DatabaseState, DatabaseStatus } from "../health.js";
import type { Database, ShardClient, ShardReplica } from "../registry.js";
import type { RolloutTarget } from "../schema/schema-rollout.js";
import type { SharedPool } from "../shared-pool.js";
import { isShardUnavailable } from "../unavailable.js";

/** A database being opened: its gate stays shut until it is ready. */
export interface Opening {
  physical: Database<ShardClient>;
  gate: DatabaseGate;
  /** The schema engine's connection (a push only). */
  target: RolloutTarget;
  /** Its client's pool, which the start-up questions share (see `overSharedPool`). */
  shared: SharedPool;
  status: DatabaseStatus;
}

/** A read replica of a database: held shut (its reads go to the database) until it is checked and caught up. */
export interface Replica {
  replica: ShardReplica<ShardClient>;
  of: Opening;
  gate: DatabaseGate;
  /** Its name and shards, for messages (never connected: its checks go through `shared`). */
  target: RolloutTarget;
  /** Its client's pool, which the checks share. */
  shared: SharedPool;
  status: DatabaseStatus;
}

/** What the retry loops share with the open that starts them. */
export interface Recovery {
  /** Aborted when the shards are closed: every loop ends. */
  stop: AbortSignal;
  /** Backoff between retries: doubling from `baseMs`, capped at `maxMs`. */
  baseMs: number;
  maxMs: number;
  timeoutMs: number;
  budgetOptions: ConnectionBudgetOptions;
  /** The databases that answered so far, with what they said: a late one is checked against them. */
  known: Inspection<ShardClient>["answered"];
  /** Sets a database's (or replica's) state, reporting a change. */
  set(db: { status: DatabaseStatus }, state: DatabaseState, error?: unknown): void;
  /** Asks a database (or replica) past its gate, through a connection of its own, within `timeoutMs`: the first row. */
  ask<Row = Inspected>(on: { target: RolloutTarget; shared: SharedPool }, sql: string): Promise<Row>;
  /** Asks a database who it is. */
  query(physical: Database<ShardClient>, sql: string): Promise<Inspected>;
  /** Rolls the schema out to one database (`index` of `total`, for progress). */
  rollout(db: Opening, index: number, total: number): Promise<unknown>;
  /** Warms the client of a database or replica that became ready (see `OpenShardsOptions.warm`). */
  warm(client: unknown): Promise<unknown>;
}

/** Retries a database that was not ready at open until it is, or is refused. */
export async function recover(db: Opening, r: Recovery): Promise<void> {
  const { stop, baseMs, maxMs, timeoutMs, budgetOptions, known, set, query, rollout } = r;
  let delay = baseMs;
  while (!stop.aborted) {
    if (!(await pause(delay, stop))) return;
    delay = Math.min(delay * 2, maxMs);
    db.status.attempts++;
    if (!known.some((k) => k.physical === db.physical)) {
      const asked = await inspect([db.physical], { timeoutMs, query });
      if (asked.answered.length === 0) {
        const error = asked.unreachable[0]!.error;
        if (!unreachable(error)) return set(db, "refused", error);
        set(db, "starting", error);
        continue;
      }
      try {
        checkInspected(
          { answered: [...known, ...asked.answered], unreachable: [] },
          budgetOptions,
          db.physical,
        );
      } catch (error) {
        return set(db, "refused", error);
      }
      known.push(...asked.answered);
    }
    try {
      await abortable(rollout(db, 0, 1), stop);
    } catch (error) {
      if (stop.aborted) return;
      if (unreachable(error)) {
        set(db, "starting", error);
        continue;
      }
      return set(db, "refused", error);
    }
    db.gate.open();
    set(db, "ready");
    await r.warm(db.physical.client);
    return;
  }
}

/**
 * Opens a replica once its database is ready and it has replayed the database's WAL up to the
 * position the database was at then (so it has the schema); retried with backoff while it is down
 * or behind. Its reads go to the database until then. A replica that answers as something else
 * than a standby of its database is refused (and stays shut).
 */
export async function openReplica(rep: Replica, r: Recovery): Promise<void> {
  const { stop, baseMs, maxMs, known, set, ask } = r;
  let delay = baseMs;
  let lsn: string | undefined;
  for (;;) {
    if (rep.of.status.state === "refused") return set(rep, "refused", `${rep.of.physical.name} was refused`);
    if (rep.of.status.state === "ready") {
      try {
        lsn ??= (await ask<{ lsn: string }>(rep.of, "SELECT pg_current_wal_lsn()::text AS lsn")).lsn;
        if (!/^[0-9A-F]+\/[0-9A-F]+$/i.test(lsn))
          throw new RegistryConfigError([`unexpected WAL position ${lsn}`]);
        const row = await ask<Inspected & { caught: boolean }>(
          rep,
          `${INSPECT}, coalesce(pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn, false) AS caught`,
        );
        const primary = known.find((k) => k.physical === rep.of.physical)?.row;
        const why = notAReplica(rep, row, primary);
        if (why) return set(rep, "refused", new RegistryConfigError([why]));
        if (row.caught) {
          rep.gate.open();
          set(rep, "ready");
          await r.warm(rep.replica.client);
          return;
        }
        set(rep, "starting", `replaying ${rep.of.physical.name}'s WAL up to ${lsn}`);
      } catch (error) {
        if (!unreachable(error) && !behind(error)) return set(rep, "refused", error);
        set(rep, "starting", error);
      }
    }
    if (!(await pause(delay, stop))) return;
    delay = Math.min(delay * 2, maxMs);
    rep.status.attempts++;
  }
}
/** Why a replica that answered `row` is not a read replica of its database (`of` answered `primary`). */
export function notAReplica(
  rep: Replica,
  row: Inspected,
  primary: Inspected | undefined,
): string | undefined {
  if (!row.standby) {
    return `${rep.status.name} is listed as a replica of ${rep.of.physical.name} but is not a standby (pg_is_in_recovery() is false): a replica must be a streaming copy of its database`;
  }
  const system = (r: Inspected) => r.server.slice(0, r.server.lastIndexOf(":"));
  if (primary && (system(row) !== system(primary) || row.database !== primary.database)) {
    return `${rep.status.name} is not a streaming replica of ${rep.of.physical.name}: it is database ${row.database} of system ${system(row)}, the database is ${primary.database} of system ${system(primary)}`;
  }
  return undefined;
}

/** Down, unreachable, not answering in time: what waiting may cure (unlike a missing database or a refused login). */
export function unreachable(error: unknown): boolean {
  if (isShardUnavailable(error)) return true;
  const message = String((error as Error | undefined)?.message ?? "");
  return /timed out after|Can't reach database server|ECONNREFUSED|Connection terminated|the database system is (starting up|shutting down)/i.test(
    message,
  );
}

/** A replica that has not replayed its database's creation yet (a new database): behind, not misconfigured. */
export function behind(error: unknown): boolean {
  const cause = (error as { cause?: { kind?: unknown } } | undefined)?.cause;
  return (
    cause?.kind === "DatabaseDoesNotExist" ||
    /database "[^"]*" does not exist/.test(String((error as Error | undefined)?.message ?? ""))
  );
}

/** Waits `ms`; false when `signal` aborted first. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** `promise`, or a rejection as soon as `signal` aborts (the work itself goes on, unobserved). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {});
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
