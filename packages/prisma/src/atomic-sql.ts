// What atomic actions (two-phase commit) and their recovery say to PostgreSQL: the global id of
// each participant's prepared transaction, what a database must offer to take part, and the
// statements on prepared transactions and decisions, with the SQLSTATEs that mean "already done".
import { createHash, randomBytes } from "node:crypto";
import { ShardIdentifier } from "@shardkit/id";
import { IDENTITY_COLUMNS, identityOf } from "./budget.js";
import { AtomicUnavailableError } from "./errors.js";
import { sqlStateOf } from "./unavailable.js";

/** The raw calls of a Prisma client (a database's or a transaction's). */
export type Raw = {
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
};
export const raw = (client: object) => client as Raw;

/** How every prepared transaction of shardkit's begins its global id. */
export const GID_PREFIX = "sk2pc:";

/** This process as a coordinator: its pid and a random tag (a pid is reused across machines and restarts). */
export const COORDINATOR = `p${process.pid}-${randomBytes(3).toString("hex")}`;

/** A new action's id: 48 random bits. */
export const newActionId = (): string => randomBytes(6).toString("hex");

/**
 * One participant's prepared transaction, as its global id names it: the action, its coordinator,
 * how many databases take part, the deciding database and this one (by identity hash), and the
 * logical shards (bits) it writes to here. A move reads the shards; recovery reads the rest.
 */
export interface AtomicGid {
  action: string;
  coordinator: string;
  participants: number;
  decider: string;
  self: string;
  shards: number[];
}

/** PostgreSQL's limit on a global id (characters, ASCII here). */
const GID_MAX = 199;

export function formatGid(g: AtomicGid): string {
  const gid = `${GID_PREFIX}${g.action}:${g.coordinator}:${g.participants}:${g.decider}:${g.self}:${g.shards.join(".")}`;
  if (gid.length > GID_MAX)
    throw new AtomicUnavailableError([
      {
        database: g.self,
        reason: `an atomic action writes to ${g.shards.length} shards of one database: their global id would pass PostgreSQL's 200 characters`,
      },
    ]);
  return gid;
}

/**
 * A global id as shardkit writes it, exactly: anything else (another program's prepared transaction,
 * one made by hand to look like shardkit's) is left alone by recovery and by moves.
 */
const GID_SHAPE =
  /^sk2pc:([0-9a-f]{12}):(p\d{1,10}-[0-9a-f]{6}):([1-9]\d{0,4}):([0-9a-f]{10}):([0-9a-f]{10}):((?:\d{1,5}(?:\.\d{1,5})*)?)$/;

/** The global id's parts, or undefined for a prepared transaction that is not shardkit's. */
export function parseGid(gid: string): AtomicGid | undefined {
  const m = GID_SHAPE.exec(gid);
  if (!m) return undefined;
  const [, action, coordinator, count, decider, self, shards] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const bits = shards === "" ? [] : shards.split(".").map(Number);
  if (bits.some((b) => !Number.isInteger(b) || b < 0 || b > 0x3fff)) return undefined;
  return { action, coordinator, participants: Number(count), decider, self, shards: bits };
}

/** The id of the action's `AtomicDecision` row. */
export const decisionId = (g: Pick<AtomicGid, "action" | "coordinator">) => `${g.action}.${g.coordinator}`;

/** The prefix of the deciding database's own global id for the action (its shards unknown to the others). */
export const deciderGidPrefix = (g: AtomicGid) =>
  `${GID_PREFIX}${g.action}:${g.coordinator}:${g.participants}:${g.decider}:${g.decider}:`;

export const shardsOf = (g: AtomicGid) => g.shards.map((b) => ShardIdentifier.fromBits(b));

/**
 * Which of a fleet's databases would refuse their part of an atomic action (their server's
 * `max_prepared_transactions` is 0), and, when others allow prepared transactions, the warning that
 * names them: what `openShards` logs and `shardkit doctor` reports. None allowing them is a fleet
 * that does not use atomic actions (sagas need nothing), not a warning.
 */
export function atomicRefusals(databases: readonly { name: string; prepared: number }[]): {
  refusing: string[];
  warning: string | undefined;
} {
  const refusing = databases.filter((d) => d.prepared <= 0).map((d) => d.name);
  const warning =
    refusing.length > 0 && refusing.length < databases.length
      ? `atomic actions ($action(fn, { atomic: true })) with a part on ${refusing.join(", ")} are refused: max_prepared_transactions = 0 (the default) on their server, while the other databases allow prepared transactions (set it above 0, at least max_connections, and restart those servers)`
      : undefined;
  return { refusing, warning };
}

/** What a database says about itself for atomic actions. */
export interface AtomicFacts {
  /** A short hash of its identity (`server:port/database`): how global ids name it. */
  id: string;
  /** Its server's `max_prepared_transactions`. */
  prepared: number;
  /** Whether it is embedded PGlite (whose settings are given when it starts). */
  embedded: boolean;
  /** Whether it has the `AtomicDecision` table. */
  decisions: boolean;
}

const FACTS_SQL = `SELECT ${IDENTITY_COLUMNS},
  current_setting('max_prepared_transactions')::int AS prepared,
  version() LIKE '%PGlite%' AS embedded,
  to_regclass('"AtomicDecision"') IS NOT NULL AS decisions`;

/**
 * Each client's facts, asked once while they allow atomic actions; a failure, or facts that refuse
 * them (no decision table yet, no prepared transactions), are asked again next time: a rollout or a
 * server restarted with the setting changed is seen without restarting the router.
 */
const known = new WeakMap<object, Promise<AtomicFacts>>();

export function factsOf(client: object): Promise<AtomicFacts> {
  let facts = known.get(client);
  if (!facts) {
    facts = raw(client)
      .$queryRawUnsafe<
        { server: string | null; database: string; prepared: number; embedded: boolean; decisions: boolean }[]
      >(FACTS_SQL)
      .then(([row]) => ({
        id: createHash("sha256").update(identityOf(row!)).digest("hex").slice(0, 10),
        prepared: Number(row!.prepared),
        embedded: row!.embedded === true,
        decisions: row!.decisions === true,
      }));
    known.set(client, facts);
    facts.then(
      (f) => {
        if (f.prepared <= 0 || !f.decisions) known.delete(client);
      },
      () => known.delete(client),
    );
  }
  return facts;
}

/**
 * The facts of the databases of an atomic action (the first one decides), each asked with `ask`;
 * refuses, before anything is written, when one of them cannot take part.
 */
export async function checkAtomic(
  databases: readonly number[],
  name: (database: number) => string,
  ask: (database: number) => Promise<AtomicFacts>,
): Promise<AtomicFacts[]> {
  const facts = await Promise.all(databases.map(ask));
  const refused: { database: string; reason: string }[] = [];
  facts.forEach((f, i) => {
    if (f.prepared <= 0)
      refused.push({
        database: name(databases[i]!),
        reason: f.embedded
          ? "it is embedded PGlite with max_prepared_transactions = 0 (the default), so it cannot prepare a transaction: start it with new PGlite(dataDir, { postgresqlconf: ['max_prepared_transactions = 16'] }) (openShards' embedded databases start so)"
          : "its server has max_prepared_transactions = 0 (the default), so it cannot prepare a transaction: set it above 0 (at least max_connections is safe) and restart the server",
      });
  });
  // Two databases that say they are one (a copied data directory: same system identifier, port and
  // name): global ids could not tell their parts apart, nor recovery which one decides.
  facts.forEach((f, i) => {
    const twin = facts.findIndex((g) => g.id === f.id);
    if (twin < i)
      refused.push({
        database: name(databases[i]!),
        reason: `it reports the same server and database as ${name(databases[twin]!)} (a copy of one data directory?): an atomic action could not tell their parts apart`,
      });
  });
  if (!facts[0]!.decisions)
    refused.push({
      database: name(databases[0]!),
      reason:
        "it decides the action but has no AtomicDecision table: add the model of @shardkit/prisma's schema/atomic.prisma to the schema and roll it out",
    });
  if (refused.length > 0) throw new AtomicUnavailableError(refused);
  return facts;
}

export const INSERT_DECISION = `INSERT INTO "AtomicDecision" (id, decision, coordinator, participants) VALUES ($1, $2, $3, $4)`;
export const INSERT_ABORT = `${INSERT_DECISION} ON CONFLICT (id) DO NOTHING`;
export const READ_DECISION = `SELECT decision FROM "AtomicDecision" WHERE id = $1`;

/** The statement that ends a prepared transaction (`gid` quoted as a literal, whatever it holds). */
export const conclude = (verb: "COMMIT" | "ROLLBACK", gid: string) =>
  `${verb} PREPARED '${gid.replaceAll("'", "''")}'`;

/**
 * Ends a prepared transaction: "done" when it ended now, "gone" when it was no longer there
 * (someone ended it first: 42704), "busy" when another session is ending it at this moment (55000).
 */
export async function endPrepared(
  client: object,
  verb: "COMMIT" | "ROLLBACK",
  gid: string,
): Promise<"done" | "gone" | "busy"> {
  try {
    await raw(client).$executeRawUnsafe(conclude(verb, gid));
    return "done";
  } catch (error) {
    const state = sqlStateOf(error);
    if (state === "42704") return "gone";
    if (state === "55000") return "busy";
    throw error;
  }
}

/** This database's prepared transactions of shardkit, with their age by its own clock. */
export const PREPARED_SQL = `SELECT gid, (extract(epoch FROM now() - prepared) * 1000)::float8 AS "ageMs"
  FROM pg_prepared_xacts
  WHERE database = current_database() AND owner = current_user AND gid LIKE '${GID_PREFIX}%' ORDER BY prepared`;

export async function preparedAt(client: object): Promise<{ gid: string; ageMs: number }[]> {
  return raw(client).$queryRawUnsafe<{ gid: string; ageMs: number }[]>(PREPARED_SQL);
}

/**
 * The global ids of the atomic actions prepared on this database that write to the shard `bits`:
 * a move waits for them before it switches the shard (their rows would commit at a former owner).
 */
export async function preparedNaming(client: object, bits: number): Promise<string[]> {
  const rows = await raw(client).$queryRawUnsafe<{ gid: string }[]>(
    `SELECT gid FROM pg_prepared_xacts
      WHERE database = current_database() AND owner = current_user AND gid LIKE '${GID_PREFIX}%'`,
  );
  return rows.map((r) => r.gid).filter((gid) => parseGid(gid)?.shards.includes(bits));
}
