import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { orAfter } from "@shardkit/prisma/internal";
import { DatabasesUnansweredError, MoveObjectGoneError, MoveTimeoutError } from "./errors.js";
import { lastLine, type Raw, raw } from "./raw.js";
import { type FencedTable, literal, shardOfRowSql } from "./sql.js";

// A live move's logical replication: a row-filtered publication of the shard on the source, a
// subscription on the target (its slot lives on the source), named per move attempt
// (`shardkit_move_<bits>_<attempt>`; `shardkit_move_<bits>` before attempts were named).

/** SQL matching the names of every move object of `shard` (any attempt), as `$1` names them. */
const OF_SHARD = (column: string) => `(${column} = $1 OR ${column} LIKE $2)`;
const shardPatterns = (shard: ShardIdentifier) => {
  const base = `shardkit_move_${shard.bits}`;
  return [base, `${base.replaceAll("_", "\\_")}\\_%`];
};

/**
 * The publication of the shard's rows in `tables` on the source (in the transaction `tx`: a move
 * creates it in the same transaction as its lease's check): row-filtered on the shard bits, inserts,
 * updates and deletes only (a replicated TRUNCATE would wipe the target's other shards).
 */
export async function publish(tx: Raw, tables: readonly FencedTable[], shard: ShardIdentifier, name: string) {
  const filters = tables.map((t) => `"${t.table}" WHERE (${shardOfRowSql(t)} = ${shard.bits})`).join(", ");
  await tx.$executeRawUnsafe(
    `CREATE PUBLICATION "${name}" FOR TABLE ${filters} WITH (publish = 'insert, update, delete')`,
  );
}

/**
 * The target's subscription to `publication`, with the initial copy and synchronous commits. Its
 * slot is made apart first, at the source, under the subscription's name: a `CREATE SUBSCRIPTION`
 * that makes its own slot hangs when both databases are on one server (making a logical slot waits
 * for every transaction holding an xid on the server to end, the `CREATE SUBSCRIPTION`'s own among
 * them). One way for every pair of databases. The statement names the slot in its text, so a
 * teardown finds it still running (`pg_stat_activity`) and cancels it.
 */
export async function subscribe<Client extends ShardClient>(
  from: Database<Client>,
  to: Database<Client>,
  name: string,
  sourceConnection: string,
  publication: string,
) {
  await raw(from).$queryRawUnsafe(
    `SELECT slot_name::text AS slot FROM pg_create_logical_replication_slot(${literal(name)}, 'pgoutput')`,
  );
  await raw(to).$executeRawUnsafe(
    `CREATE SUBSCRIPTION "${name}" CONNECTION ${literal(sourceConnection)} PUBLICATION "${publication}"
     WITH (copy_data = true, synchronous_commit = 'on', create_slot = false, slot_name = ${literal(name)})`,
  );
}

/**
 * A move's subscription or slot that is gone while the move waits on it (someone dropped it by
 * hand): the move cannot go on, and says so at once rather than wait out its time.
 */
const gone = (what: string, database: string) => new MoveObjectGoneError(what, database);

/** Whether the subscription's initial copy is done: every table ready. Throws when the subscription is gone. */
export async function copied<Client extends ShardClient>(to: Database<Client>, subscription: string) {
  const [row] = await raw(to).$queryRawUnsafe<{ present: boolean; waiting: number }[]>(
    `SELECT EXISTS (SELECT FROM pg_subscription WHERE subname = $1
         AND subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())) AS present,
       (SELECT count(*)::int FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
         WHERE s.subname = $1 AND r.srsubstate <> 'r') AS waiting`,
    subscription,
  );
  if (!row!.present) throw gone(`the move's subscription ${subscription}`, to.name);
  return row!.waiting === 0;
}

/** Bytes of WAL the subscription's slot is behind the source. Throws when the slot is gone. */
export async function lagBytes<Client extends ShardClient>(
  from: Database<Client>,
  slot: string,
): Promise<number> {
  const [row] = await raw(from).$queryRawUnsafe<{ lag: number | null }[]>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::float8 AS lag FROM pg_replication_slots WHERE slot_name = $1`,
    slot,
  );
  if (!row) throw gone(`the move's replication slot ${slot}`, from.name);
  return row.lag ?? Number.POSITIVE_INFINITY;
}

/** The source's current WAL position. */
export async function walPosition<Client extends ShardClient>(from: Database<Client>): Promise<string> {
  const [row] = await raw(from).$queryRawUnsafe<{ lsn: string }[]>(
    "SELECT pg_current_wal_lsn()::text AS lsn",
  );
  return row!.lsn;
}

/** Whether the subscription's slot has confirmed the source's WAL up to `lsn`. Throws when the slot is gone. */
export async function reached<Client extends ShardClient>(
  from: Database<Client>,
  slot: string,
  lsn: string,
): Promise<boolean> {
  const [row] = await raw(from).$queryRawUnsafe<{ reached: boolean }[]>(
    `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) AS reached FROM pg_replication_slots WHERE slot_name = $1`,
    slot,
    lsn,
  );
  if (!row) throw gone(`the move's replication slot ${slot}`, from.name);
  return row.reached;
}

/**
 * Drops every move object of `shard` (any attempt: an abandoned one's too; with `only`, one
 * attempt's) on these databases.
 *
 * First the target: a `CREATE SUBSCRIPTION` of the shard still running there (a mover that froze
 * while it was sent) is cancelled and waited for until it has ended, then the subscriptions are
 * dropped (which drops their slots, the copy's too, at the source). A subscription whose source does
 * not answer is disabled and left: dropping it would leave its slots on the source, where nothing
 * names them any more. Then the source: its inactive slots of the shard, whatever the target said
 * (a slot holds WAL); one still in use (its sender not exited yet) is waited for up to `waitMs` (the
 * move's `copyTimeoutMs`), as is each statement cancelled on either side. The
 * publications only once the target answered and holds neither a subscription nor a
 * `CREATE SUBSCRIPTION` of the shard: a subscription created after its publication is gone reads no
 * row filter, and its copy would take every shard's rows. A publication left behind costs nothing
 * and the next teardown drops it. Throws naming what could not be cleaned (a rerun tears down again).
 */
export async function teardown<Client extends ShardClient>(
  from: Database<Client>,
  to: Database<Client>,
  shard: ShardIdentifier,
  /** How long a statement being cancelled, or a slot still in use, is waited for (ms). */
  waitMs: number,
  /** Only the objects of this name (one attempt's), not every attempt's. */
  only?: string,
): Promise<void> {
  const patterns = only === undefined ? shardPatterns(shard) : [only, only];
  // The statement's text as the mover sent it: `CREATE SUBSCRIPTION "<name>" ...` (names are
  // [a-z0-9_], so they need no escaping in a regular expression).
  const name = only ?? `shardkit_move_${shard.bits}(_[0-9a-f]+)?`;
  const problems: { database: string; error: string }[] = [];
  const targetClean = await (async () => {
    const cancelled = await cancelRunning(to, `^CREATE SUBSCRIPTION "${name}"`, waitMs);
    if (cancelled !== "done") {
      problems.push({
        database: to.name,
        error: notDone(cancelled, waitMs, `a CREATE SUBSCRIPTION of shard ${shard.key} still runs`),
      });
      return false;
    }
    const subscriptions = await raw(to).$queryRawUnsafe<{ name: string; oid: string }[]>(
      `SELECT subname::text AS name, oid::text AS oid FROM pg_subscription
       WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND ${OF_SHARD("subname")}`,
      ...patterns,
    );
    for (const { name, oid } of subscriptions)
      await dropSubscription(shard, from, raw(to), { name, oid, waitMs });
    return true;
  })().catch((error: unknown) => {
    problems.push({ database: to.name, error: lastLine(error) });
    return false;
  });
  try {
    // A slot of the shard still being made (its maker waits for the server's transactions to end):
    // cancelled, which drops it.
    const making = await cancelRunning(from, `pg_create_logical_replication_slot\\('${name}'`, waitMs);
    if (making !== "done")
      problems.push({
        database: from.name,
        error: notDone(making, waitMs, `the slot of shard ${shard.key} is still being made`),
      });
    const left = await dropSlots(from, patterns, waitMs);
    if (left) problems.push({ database: from.name, error: left });
    if (targetClean) {
      const publications = await raw(from).$queryRawUnsafe<{ name: string }[]>(
        `SELECT pubname::text AS name FROM pg_publication WHERE ${OF_SHARD("pubname")}`,
        ...patterns,
      );
      for (const { name } of publications)
        await raw(from).$executeRawUnsafe(`DROP PUBLICATION IF EXISTS "${name}"`);
    }
  } catch (error) {
    problems.push({ database: from.name, error: lastLine(error) });
  }
  if (problems.length > 0)
    throw new DatabasesUnansweredError(
      `shard ${shard.key}: its move's replication could not be torn down`,
      problems,
    );
}

/**
 * Drops the source's inactive slots matching `patterns` until none in use is left, for up to
 * `waitMs`; what is still left then (undefined: none).
 */
async function dropSlots<Client extends ShardClient>(
  from: Database<Client>,
  patterns: string[],
  waitMs: number,
): Promise<string | undefined> {
  let active: string[] = [];
  const released = await pollFor(waitMs, async () => {
    const slots = await raw(from).$queryRawUnsafe<{ name: string; active: boolean }[]>(
      `SELECT slot_name::text AS name, active FROM pg_replication_slots
       WHERE database = current_database() AND ${OF_SHARD("slot_name")}`,
      ...patterns,
    );
    for (const slot of slots.filter((s) => !s.active)) {
      await raw(from)
        .$queryRawUnsafe(
          `SELECT pg_drop_replication_slot($1)::text AS dropped FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`,
          slot.name,
        )
        .catch(() => {});
    }
    active = slots.filter((s) => s.active).map((s) => s.name);
    return active.length === 0;
  });
  return released === "done"
    ? undefined
    : notDone(released, waitMs, `slot ${active.join(", ")} still in use`);
}

/**
 * Cancels every statement of this database matching `pattern` (a regular expression over its text)
 * until none runs, for up to `waitMs`.
 */
function cancelRunning<Client extends ShardClient>(
  db: Database<Client>,
  pattern: string,
  waitMs: number,
): Promise<Polled> {
  return pollFor(waitMs, async () => {
    const running = await raw(db).$queryRawUnsafe<{ cancelled: boolean }[]>(
      `SELECT pg_cancel_backend(pid) AS cancelled FROM pg_stat_activity
       WHERE pid <> pg_backend_pid() AND datname = current_database() AND state <> 'idle' AND query ~ $1`,
      pattern,
    );
    return running.length === 0;
  });
}

/** How a wait of `pollFor` ended: it held, it still did not after the time allowed, or a statement of the last round had not answered by then. */
type Polled = "done" | "still" | "unanswered";

/**
 * Runs `done` every 100 ms until it holds or `waitMs` have passed; no round starts after that. Each
 * of its statements is bounded too, as the work that runs it is (a move's: `copyTimeoutMs`).
 */
async function pollFor(waitMs: number, done: () => Promise<boolean>): Promise<Polled> {
  let asking = false;
  const polled = await orAfter(waitMs, undefined, async (signal): Promise<Polled> => {
    while (!signal.aborted) {
      asking = true;
      const held = await done();
      asking = false;
      if (held) return "done";
      await new Promise((r) => setTimeout(r, 100));
    }
    return "still";
  });
  return polled ?? (asking ? "unanswered" : "still");
}

/** What a wait of `pollFor` that did not hold says: `still` (what still holds), or that its database did not answer. */
const notDone = (polled: Polled, waitMs: number, still: string) =>
  polled === "unanswered" ? `no answer within ${waitMs} ms` : `${still} after ${waitMs} ms`;

/**
 * Drops a subscription (and, through it, its slots at the source). Disabled first (its workers stop
 * and none starts again), then the slots of its table copies still being made at the source are
 * cancelled: each waits, as the move's own slot did, for the source server's open transactions to
 * end, and a `DROP SUBSCRIPTION` would wait for them (and, given up, leave them to be made later,
 * holding WAL under a name no move knows). When its source does not answer, the subscription stays
 * disabled and the error is thrown: it is dropped by a later teardown, once the source answers.
 * Its slot may be gone from the source already (an earlier teardown dropped it there while the
 * target did not answer: its sender had exited at `wal_sender_timeout`), and `DROP SUBSCRIPTION`
 * fails on a slot it cannot find ("could not drop replication slot … does not exist"): a slot the
 * source does not list is detached from the subscription first, which is then dropped without it.
 */
async function dropSubscription<Client extends ShardClient>(
  shard: ShardIdentifier,
  from: Database<Client>,
  db: Raw,
  { name, oid, waitMs }: { name: string; oid: string; waitMs: number },
): Promise<void> {
  await db.$executeRawUnsafe(`ALTER SUBSCRIPTION "${name}" DISABLE`);
  if ((await cancelRunning(from, syncSlotMaking(oid), waitMs)) !== "done")
    throw new MoveTimeoutError(
      shard,
      `cancelling the making of subscription ${name}'s table copies' slots (waiting for ${from.name})`,
      waitMs,
    );
  await detachGoneSlot(from, db, name, oid);
  try {
    await db.$executeRawUnsafe(`DROP SUBSCRIPTION IF EXISTS "${name}"`);
  } catch (error) {
    // Its slot was dropped at the source meanwhile (another teardown): dropped without it.
    if (!(await detachGoneSlot(from, db, name, oid))) throw error;
    await db.$executeRawUnsafe(`DROP SUBSCRIPTION IF EXISTS "${name}"`);
  }
}

/**
 * Detaches the slot of the subscription `oid` (disabled) when the source does not list it (`SET
 * (slot_name = NONE)`); true when it did. Its table copies' slots are still dropped with it (a
 * copy's slot that is gone is no error to `DROP SUBSCRIPTION`).
 */
async function detachGoneSlot<Client extends ShardClient>(
  from: Database<Client>,
  db: Raw,
  name: string,
  oid: string,
): Promise<boolean> {
  const [sub] = await db.$queryRawUnsafe<{ slot: string | null }[]>(
    `SELECT subslotname::text AS slot FROM pg_subscription WHERE oid = $1::oid`,
    oid,
  );
  if (!sub?.slot) return false; // dropped meanwhile, or detached already
  const [listed] = await raw(from).$queryRawUnsafe<{ present: boolean }[]>(
    `SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1) AS present`,
    sub.slot,
  );
  if (listed!.present) return false;
  await db.$executeRawUnsafe(`ALTER SUBSCRIPTION "${name}" SET (slot_name = NONE)`);
  return true;
}

/** The statement (its text, a regular expression) of a WAL sender making a slot for a table copy of the subscription `oid`. */
const syncSlotMaking = (oid: string) => `^CREATE_REPLICATION_SLOT "pg_${oid}_sync_`;

/**
 * What the making of the move's slots (its own, under `name`, and its table copies') waits for at the
 * source, in words, or undefined when none waits: making a logical slot waits for every transaction
 * of the source's server that holds a transaction id (in any of its databases) to end.
 */
export async function slotWaits<Client extends ShardClient>(
  from: Database<Client>,
  to: Database<Client>,
  name: string,
): Promise<string | undefined> {
  const subscriptions = await raw(to)
    .$queryRawUnsafe<{ oid: string }[]>(
      `SELECT oid::text AS oid FROM pg_subscription WHERE subname = $1
       AND subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      name,
    )
    // A subscription the target cannot list is left out; a target that does not answer in time is named.
    .catch((error: unknown) => {
      if (error instanceof MoveTimeoutError) throw error;
      return [];
    });
  const making = [
    `pg_create_logical_replication_slot\\(${literal(name)}`,
    ...subscriptions.map((s) => syncSlotMaking(s.oid)),
  ];
  const blockers = await raw(from).$queryRawUnsafe<
    {
      pid: number;
      database: string | null;
      user: string | null;
      state: string | null;
      seconds: number | null;
      query: string | null;
    }[]
  >(
    `SELECT DISTINCT b.pid, d.datname::text AS database, d.usename::text AS user, d.state,
       extract(epoch FROM clock_timestamp() - d.xact_start)::int AS seconds, left(d.query, 80) AS query
     FROM pg_stat_activity w CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid)
     LEFT JOIN pg_stat_activity d ON d.pid = b.pid
     WHERE w.datname = current_database() AND w.pid <> pg_backend_pid() AND w.query ~ $1
     ORDER BY b.pid`,
    making.join("|"),
  );
  if (blockers.length === 0) return undefined;
  const each = blockers.map((b) =>
    b.pid === 0
      ? "a prepared transaction (pg_prepared_xacts: COMMIT PREPARED or ROLLBACK PREPARED it)"
      : `pid ${b.pid} (database ${b.database}, user ${b.user}, ${b.state}, open for ${b.seconds} s: ${JSON.stringify(b.query)})`,
  );
  return `making its replication slot at ${from.name} waits for these transactions of its server to end: ${each.join("; ")}`;
}
