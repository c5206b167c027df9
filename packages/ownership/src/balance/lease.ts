// The fleet's balance lease: one balance or drain run per fleet at a time. It is one row of
// `shardkit."BalanceLease"` on every database of the fleet, taken database by database in the order
// of what each database says it is (its server's system identifier and port, its name: the same for
// every configuration of the fleet, whatever it names the databases or however it orders them), by
// compare-and-set (only when there is none, or it lapsed), with its holder (host, pid, a run id) and
// an expiry by that database's clock. A run refused on one gives back the ones it took. Two runs over
// configurations that share any database meet on the first they share, in the same order: one is
// refused. It is renewed on each while the run works and deleted at its end; a run that lost it on
// any database (it lapsed, another run took it) finds out at its next check and starts no other move.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { databaseIdentities, LOCKS } from "@shardkit/prisma/internal";
import { BalanceLeaseHeldError, DatabasesUnansweredError } from "../errors.js";
import { bounded, type Raw, raw, unbounded } from "../raw.js";

/** Where the lease is kept, on every database of the fleet. */
export const BALANCE_LEASE_TABLE = `shardkit."BalanceLease"`;

/** Made on a run's first take (under the lease's advisory lock: runs starting at once are fine). */
const CREATE = [
  "CREATE SCHEMA IF NOT EXISTS shardkit",
  `CREATE TABLE IF NOT EXISTS ${BALANCE_LEASE_TABLE} (
  fleet text PRIMARY KEY,
  host text NOT NULL,
  pid integer NOT NULL,
  run text NOT NULL,
  what text NOT NULL,
  token bigint NOT NULL,
  "takenAt" timestamptz NOT NULL,
  "expiresAt" timestamptz NOT NULL
)`,
];

/** The lease's row: one per fleet. */
const FLEET = "fleet";

interface Row {
  host: string;
  pid: number;
  run: string;
  what: string;
  token: string;
  expiresAt: Date;
  expiresInMs: number;
}

/** The lease of one balance or drain run (`BalanceLease.take`). */
export class BalanceLease {
  private timer: ReturnType<typeof setInterval> | undefined;
  private renewing = false;
  private lostTo: string | undefined;

  private constructor(
    /** The databases it is held on, each with its row's token. */
    private readonly held: readonly { database: Database<ShardClient>; token: string }[],
    readonly run: string,
    readonly leaseMs: number,
    private readonly timeoutMs: number,
  ) {}

  /**
   * The fleet's databases in the order the lease is taken: by what each says it is (server system
   * identifier and port, database name), then by name; the same order for every configuration of
   * the fleet. A database that does not answer within `timeoutMs`: `DatabasesUnansweredError`.
   */
  static async order<Client extends ShardClient>(
    registry: ShardRegistry<Client>,
    timeoutMs: number,
  ): Promise<Database<Client>[]> {
    const identities = await databaseIdentities(registry, { timeoutMs });
    const missing = registry.databases.filter((d) => !identities.has(d));
    if (missing.length > 0)
      throw new DatabasesUnansweredError(
        "the fleet's balance lease could not be taken",
        missing.map((d) => ({ database: d.name, error: `no answer in ${timeoutMs} ms` })),
      );
    const key = (d: Database<Client>) => [identities.get(d)!, d.name].join("\u0000");
    return [...registry.databases].sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));
  }

  /**
   * Takes the fleet's balance lease for `what` (`balance`, `drain <database>`) on every database, in
   * `order`: only where no run holds it, or its holder's lease lapsed. `BalanceLeaseHeldError`
   * naming the holder (and the database) otherwise, once what it took is given back. Renewed every
   * third of `leaseMs` from then on, until `release()`.
   */
  static async take<Client extends ShardClient>(
    registry: ShardRegistry<Client>,
    what: string,
    options: { leaseMs: number; timeoutMs: number },
  ): Promise<BalanceLease> {
    const order = (await BalanceLease.order(registry, options.timeoutMs)) as Database<ShardClient>[];
    const run = randomUUID().slice(0, 8);
    const held: { database: Database<ShardClient>; token: string }[] = [];
    try {
      for (const database of order) {
        const taken = await takeOn(database, run, what, options);
        if (typeof taken !== "string")
          throw new BalanceLeaseHeldError({ ...taken, pid: Number(taken.pid), database: database.name });
        held.push({ database, token: taken });
      }
    } catch (error) {
      await new BalanceLease(held, run, options.leaseMs, options.timeoutMs).release();
      throw error;
    }
    const lease = new BalanceLease(held, run, options.leaseMs, options.timeoutMs);
    lease.start();
    return lease;
  }

  private start(): void {
    // Renewals outlive the deadline of whatever started them; one that does not answer is not
    // repeated behind it: the lease lapses by its database's clock.
    this.timer = unbounded(() =>
      setInterval(
        () => {
          if (this.renewing || this.lostTo) return;
          this.renewing = true;
          this.renew()
            .catch(() => {})
            .finally(() => {
              this.renewing = false;
            });
        },
        Math.max(100, Math.floor(this.leaseMs / 3)),
      ),
    );
    this.timer.unref?.();
  }

  /**
   * Extends the lease by its period from now on every database: undefined while it is this run's,
   * else who holds it now where it was lost (it lapsed, and another run took it): the run then
   * starts no other move.
   */
  async renew(): Promise<string | undefined> {
    if (this.lostTo) return this.lostTo;
    const lost = await Promise.all(
      this.held.map(async ({ database, token }) => {
        const renewed = await within(database, this.timeoutMs, (db) =>
          db.$queryRawUnsafe<{ run: string }[]>(
            `UPDATE ${BALANCE_LEASE_TABLE} SET "expiresAt" = clock_timestamp() + $4::float8 * interval '1 millisecond'
             WHERE fleet = $1 AND run = $2 AND token = $3::bigint RETURNING run`,
            FLEET,
            this.run,
            token,
            this.leaseMs,
          ),
        );
        if (renewed.length > 0) return undefined;
        const now = await within(database, this.timeoutMs, readRow);
        return now
          ? `${now.what} by host ${now.host}, pid ${now.pid}, run ${now.run} holds it now`
          : `nobody holds it now on ${database.name}`;
      }),
    );
    this.lostTo = lost.find((l) => l !== undefined);
    if (this.lostTo) this.stop();
    return this.lostTo;
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops renewing and gives the lease up (best effort: unless deleted, it lapses within its period). */
  async release(): Promise<void> {
    this.stop();
    await Promise.all(
      this.held.map(({ database, token }) =>
        within(database, this.timeoutMs, (db) =>
          db.$executeRawUnsafe(
            `DELETE FROM ${BALANCE_LEASE_TABLE} WHERE fleet = $1 AND run = $2 AND token = $3::bigint`,
            FLEET,
            this.run,
            token,
          ),
        ).catch(() => {}),
      ),
    );
  }
}

/** The lease taken on one database: its row's token, or the live row of the run that holds it. */
function takeOn(
  database: Database<ShardClient>,
  run: string,
  what: string,
  options: { leaseMs: number; timeoutMs: number },
): Promise<string | Row> {
  return within(database, options.timeoutMs, (db) =>
    db.$transaction(async (tx) => {
      await tx.$queryRawUnsafe(`SELECT pg_advisory_xact_lock(${LOCKS.balance})::text AS locked`);
      for (const statement of CREATE) await tx.$executeRawUnsafe(statement);
      const rows = await tx.$queryRawUnsafe<{ token: string }[]>(
        `INSERT INTO ${BALANCE_LEASE_TABLE} AS l (fleet, host, pid, run, what, token, "takenAt", "expiresAt")
         VALUES ($1, $2, $3, $4, $5, 1, clock_timestamp(), clock_timestamp() + $6::float8 * interval '1 millisecond')
         ON CONFLICT (fleet) DO UPDATE SET host = $2, pid = $3, run = $4, what = $5, token = l.token + 1,
           "takenAt" = clock_timestamp(), "expiresAt" = clock_timestamp() + $6::float8 * interval '1 millisecond'
         WHERE l."expiresAt" < clock_timestamp()
         RETURNING token::text AS token`,
        FLEET,
        hostname(),
        process.pid,
        run,
        what,
        options.leaseMs,
      );
      // Not taken: a live row is there (the lock keeps it from going meanwhile).
      return rows[0]?.token ?? (await readRow(tx))!;
    }),
  );
}

async function readRow(db: Raw): Promise<Row | undefined> {
  const [row] = await db.$queryRawUnsafe<Row[]>(
    `SELECT host, pid, run, what, token::text AS token, "expiresAt",
       (extract(epoch FROM "expiresAt" - clock_timestamp()) * 1000)::float8 AS "expiresInMs"
     FROM ${BALANCE_LEASE_TABLE} WHERE fleet = $1`,
    FLEET,
  );
  return row;
}

/** `work` on `database`, every statement answering within `timeoutMs`. */
function within<T>(
  database: Database<ShardClient>,
  timeoutMs: number,
  work: (db: Raw) => Promise<T>,
): Promise<T> {
  return bounded(
    {
      at: performance.now() + timeoutMs,
      late: (name) =>
        new DatabasesUnansweredError("the fleet's balance lease could not be read", [
          { database: name, error: `no answer in ${timeoutMs} ms` },
        ]),
    },
    () => work(raw(database)),
  );
}
