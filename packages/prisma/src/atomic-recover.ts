// Recovery of atomic actions, without a person: any router finds shardkit's prepared transactions
// older than the coordinator's lease and ends each as its deciding database says. The deciding
// database is the arbiter: its own prepared transaction holds the decision row, so an action commits
// exactly when that transaction does. Recovery rolls that transaction back once the lease lapsed, and
// records an `abort` decision where none is (a committed row that the coordinator's own insert then
// collides with): from there on the action can only be rolled back. Every step is safe to run twice
// or from two routers at once: an end already done answers "gone", one in progress "busy".
import type { ShardIdentifier } from "@shardkit/id";
import {
  type AtomicFacts,
  type AtomicGid,
  COORDINATOR,
  deciderGidPrefix,
  decisionId,
  endPrepared,
  factsOf,
  INSERT_ABORT,
  parseGid,
  preparedAt,
  READ_DECISION,
  raw,
  shardsOf,
} from "./atomic-sql.js";
import { withDeadline } from "./deadline.js";
import { DatabaseTimeoutError } from "./errors.js";
import { sqlStateOf } from "./unavailable.js";

export interface AtomicRecoveryOptions {
  /**
   * How long a coordinator has to finish an action it prepared (its lease): a prepared transaction
   * younger than this is left alone, one older is concluded. Default 10 s. Correctness does not
   * depend on it (a coordinator slower than the lease sees its action rolled back everywhere).
   */
  leaseMs?: number;
  /** Only list what is in doubt; change nothing. */
  dryRun?: boolean;
  /** How long decision rows are kept once nothing is prepared for them any more. Default 1 day. */
  keepDecisionsMs?: number;
  /**
   * How long one database has to answer each part of a round (its prepared transactions; what to do
   * with one of them) before it is reported `unanswered` with a `DatabaseTimeoutError` and the round
   * goes on (a frozen server is concluded by a later round). Default: the router's `timeoutMs`.
   */
  timeoutMs?: number;
  /**
   * Called once every database answered (or failed) with how many prepared transactions were found,
   * then after each one is handled (concluded, or left) with its entry: a command's progress.
   */
  onProgress?: (event: { found: number; done: number; transaction?: InDoubtTransaction }) => void;
}

/** A participant's prepared transaction of an atomic action, as recovery found it. */
export interface InDoubtTransaction {
  /** The name of the database it is prepared on. */
  database: string;
  gid: string;
  /** The action's global id (`AtomicDecision.id`) and its coordinator. */
  action: string;
  coordinator: string;
  /** The logical shards it writes to on this database. */
  shards: ShardIdentifier[];
  /** How many databases take part. */
  participants: number;
  /** How long ago it was prepared, by its server's clock. */
  ageMs: number;
  /** What its deciding database says: `commit`, `abort`, `undecided` (not yet), `unknown` (no answer, or not in this registry). */
  decision: "commit" | "abort" | "undecided" | "unknown";
  /** What recovery did: committed, rolled back, or left it (younger than the lease, ended by someone else meanwhile, or undecidable here). */
  outcome: "committed" | "rolled-back" | "left";
}

export interface AtomicRecoveryReport {
  transactions: InDoubtTransaction[];
  /** Databases that did not answer (their prepared transactions were not seen). */
  unanswered: { database: string; error: unknown }[];
}

interface Db {
  client: object;
  name: string;
  /** The logical shards it holds (for a timeout's message). */
  shards: readonly ShardIdentifier[];
  facts?: AtomicFacts;
}

const DECISION_LOCK_TIMEOUT = "2s";

/**
 * Finds every prepared transaction of shardkit's atomic actions on `databases` and concludes those
 * older than the lease as their deciding database says (commit when it committed, else roll back).
 */
export async function recoverAtomic(
  databases: readonly { client: object; name: string; shards?: readonly ShardIdentifier[] }[],
  options: AtomicRecoveryOptions = {},
): Promise<AtomicRecoveryReport> {
  const leaseMs = options.leaseMs ?? 10_000;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const dbs: Db[] = databases.map((d) => ({ client: d.client, name: d.name, shards: d.shards ?? [] }));
  const bounded = <T>(db: Db, run: () => Promise<T>) =>
    withDeadline(timeoutMs, () => new DatabaseTimeoutError(db.name, db.shards, timeoutMs), run);
  const unanswered: AtomicRecoveryReport["unanswered"] = [];
  const found: { db: Db; gid: string; ageMs: number; parsed: AtomicGid }[] = [];
  await Promise.all(
    dbs.map(async (db) => {
      try {
        const prepared = await bounded(db, async () => {
          db.facts = await factsOf(db.client);
          return db.facts.prepared <= 0 ? [] : await preparedAt(db.client);
        });
        for (const { gid, ageMs } of prepared) {
          const parsed = parseGid(gid);
          if (parsed) found.push({ db, gid, ageMs: Number(ageMs), parsed });
        }
      } catch (error) {
        unanswered.push({ database: db.name, error });
      }
    }),
  );
  const byId = new Map(dbs.filter((d) => d.facts).map((d) => [d.facts!.id, d]));
  /** The global ids this sweep rolled back while deciding (a decider's own transactions). */
  const ended = new Set<string>();
  const transactions: InDoubtTransaction[] = [];
  const silent = new Set(unanswered.map((u) => u.database));
  // The decider's own transaction first: rolling back an undecided one decides its action.
  found.sort(
    (a, b) => Number(b.parsed.self === b.parsed.decider) - Number(a.parsed.self === a.parsed.decider),
  );
  options.onProgress?.({ found: found.length, done: 0 });
  for (const f of found) {
    const entry: InDoubtTransaction = {
      database: f.db.name,
      gid: f.gid,
      action: decisionId(f.parsed),
      coordinator: f.parsed.coordinator,
      shards: shardsOf(f.parsed),
      participants: f.parsed.participants,
      ageMs: f.ageMs,
      decision: "unknown",
      outcome: "left",
    };
    transactions.push(entry);
    const decider = byId.get(f.parsed.decider);
    // A database that did not answer this round is asked nothing more in it (each ask would wait out the deadline).
    if (!decider || silent.has(decider.name) || silent.has(f.db.name)) {
      options.onProgress?.({ found: found.length, done: transactions.length, transaction: entry });
      continue;
    }
    let asked = decider;
    try {
      const settle = f.ageMs >= leaseMs && !options.dryRun;
      entry.decision = await bounded(decider, () => decisionOf(decider, f.parsed, settle, leaseMs, ended));
      if (!settle) continue;
      if (ended.has(f.gid)) entry.outcome = "rolled-back";
      else if (entry.decision === "commit" || entry.decision === "abort") {
        const verb = entry.decision === "commit" ? "COMMIT" : "ROLLBACK";
        asked = f.db;
        if ((await bounded(f.db, () => endPrepared(f.db.client, verb, f.gid))) === "done")
          entry.outcome = entry.decision === "commit" ? "committed" : "rolled-back";
      }
    } catch (error) {
      unanswered.push({ database: asked.name, error });
      if (error instanceof DatabaseTimeoutError) silent.add(asked.name);
    } finally {
      options.onProgress?.({ found: found.length, done: transactions.length, transaction: entry });
    }
  }
  if (!options.dryRun && unanswered.length === 0)
    await forgetDecisions(dbs, found, options.keepDecisionsMs ?? 86_400_000);
  return { transactions, unanswered };
}

/**
 * What the deciding database says of an action: its decision row, else `undecided`. With `settle`
 * (the lease lapsed), an undecided action is decided `abort`: the decider's own prepared transaction
 * is rolled back (its decision row with it), and an `abort` row is recorded where none is.
 */
async function decisionOf(
  decider: Db,
  g: AtomicGid,
  settle: boolean,
  leaseMs: number,
  ended: Set<string>,
): Promise<"commit" | "abort" | "undecided"> {
  const id = decisionId(g);
  const client = decider.client;
  const read = async () =>
    (await raw(client).$queryRawUnsafe<{ decision: string }[]>(READ_DECISION, id))[0]?.decision;
  const recorded = await read();
  if (recorded === "commit" || recorded === "abort") return recorded;
  if (!settle) return "undecided";
  const prefix = deciderGidPrefix(g);
  for (const own of await preparedAt(client)) {
    if (!own.gid.startsWith(prefix)) continue;
    if (Number(own.ageMs) < leaseMs) return "undecided";
    const end = await endPrepared(client, "ROLLBACK", own.gid);
    if (end === "busy") return "undecided";
    if (end === "done") ended.add(own.gid);
  }
  const interactive = client as { $transaction(fn: (tx: object) => Promise<unknown>): Promise<unknown> };
  try {
    await interactive.$transaction(async (tx) => {
      await raw(tx).$executeRawUnsafe(`SET LOCAL lock_timeout = '${DECISION_LOCK_TIMEOUT}'`);
      await raw(tx).$executeRawUnsafe(INSERT_ABORT, id, "abort", `recovery:${COORDINATOR}`, "[]");
    });
  } catch (error) {
    // 55P03: the coordinator's own decision row is being written (its transaction not yet prepared).
    if (sqlStateOf(error) === "55P03") return "undecided";
    throw error;
  }
  const decided = await read();
  return decided === "commit" ? "commit" : "abort";
}

/**
 * Deletes the decision rows older than `keepMs` of actions prepared nowhere any more (run only when
 * every database answered: a participant unseen might still need its decision), and only those whose
 * every participant is a database of this registry (one this router cannot see, another service's,
 * may still hold a prepared part that needs the decision).
 */
async function forgetDecisions(
  dbs: readonly Db[],
  found: readonly { parsed: AtomicGid }[],
  keepMs: number,
): Promise<void> {
  const live = [...new Set(found.map((f) => decisionId(f.parsed)))];
  const seen = dbs.flatMap((d) => (d.facts ? [d.facts.id] : []));
  await Promise.allSettled(
    dbs
      .filter((d) => d.facts?.decisions)
      .map((d) =>
        raw(d.client).$executeRawUnsafe(
          `DELETE FROM "AtomicDecision" WHERE "createdAt" < now() - make_interval(secs => $1::float8 / 1000)
            AND NOT (id = ANY($2::text[]))
            AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(participants::jsonb) p
              WHERE NOT (p->>'database' = ANY($3::text[])))`,
          keepMs,
          live,
          seen,
        ),
      ),
  );
}

/** A router's periodic recovery: `recoverAtomic` every `everyMs` (default: the lease), until `stop()`. */
export function startAtomicRecovery(
  recover: () => Promise<unknown>,
  options: { everyMs: number; onError?: (error: unknown) => void },
): { stop(): Promise<void> } {
  let running = true;
  let current: Promise<unknown> = Promise.resolve();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = () => {
    current = recover()
      .catch((error) => options.onError?.(error))
      .finally(() => {
        if (running) {
          timer = setTimeout(tick, options.everyMs);
          timer.unref?.();
        }
      });
  };
  timer = setTimeout(tick, options.everyMs);
  timer.unref?.();
  return {
    async stop() {
      running = false;
      clearTimeout(timer);
      await current;
    },
  };
}
