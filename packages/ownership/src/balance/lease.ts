// The fleet's balance lease: one balance or drain run per fleet at a time. It is the one row of
// `shardkit."BalanceLease"` on the fleet's first database by name, taken by compare-and-set (only
// when there is none, or it lapsed), with its holder (host, pid, a run id) and an expiry by that
// database's clock, renewed while the run works and deleted at its end. A run that lost it (it
// lapsed, another run took it) finds out at its next check and starts no other move.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { LOCKS } from "@shardkit/prisma/internal";
import { BalanceLeaseHeldError, DatabasesUnansweredError } from "../errors.js";
import { bounded, type Raw, raw, unbounded } from "../raw.js";

/** Where the lease is kept, on the fleet's first database by name. */
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
    private readonly database: Database<ShardClient>,
    readonly run: string,
    private readonly token: string,
    readonly leaseMs: number,
    private readonly timeoutMs: number,
  ) {}

  /** The database that holds the lease: the fleet's first by name, the same for every run over the same databases. */
  static home<Client extends ShardClient>(registry: ShardRegistry<Client>): Database<Client> {
    return [...registry.databases].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))[0]!;
  }

  /**
   * Takes the fleet's balance lease for `what` (`balance`, `drain <database>`): only when no run
   * holds it, or its holder's lease lapsed. `BalanceLeaseHeldError` naming the holder otherwise.
   * Renewed every third of `leaseMs` from then on, until `release()`.
   */
  static async take<Client extends ShardClient>(
    registry: ShardRegistry<Client>,
    what: string,
    options: { leaseMs: number; timeoutMs: number },
  ): Promise<BalanceLease> {
    const database = BalanceLease.home(registry) as Database<ShardClient>;
    const run = randomUUID().slice(0, 8);
    const taken = await within(database, options.timeoutMs, (db) =>
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
    if (typeof taken !== "string")
      throw new BalanceLeaseHeldError({ ...taken, pid: Number(taken.pid), database: database.name });
    const lease = new BalanceLease(database, run, taken, options.leaseMs, options.timeoutMs);
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
   * Extends the lease by its period from now: undefined while it is this run's, else who holds it
   * now (the lease lapsed, and another run took it): the run then starts no other move.
   */
  async renew(): Promise<string | undefined> {
    if (this.lostTo) return this.lostTo;
    const renewed = await within(this.database, this.timeoutMs, (db) =>
      db.$queryRawUnsafe<{ run: string }[]>(
        `UPDATE ${BALANCE_LEASE_TABLE} SET "expiresAt" = clock_timestamp() + $4::float8 * interval '1 millisecond'
         WHERE fleet = $1 AND run = $2 AND token = $3::bigint RETURNING run`,
        FLEET,
        this.run,
        this.token,
        this.leaseMs,
      ),
    );
    if (renewed.length > 0) return undefined;
    const now = await within(this.database, this.timeoutMs, readRow);
    this.lostTo = now
      ? `${now.what} by host ${now.host}, pid ${now.pid}, run ${now.run} holds it now`
      : "nobody holds it now";
    this.stop();
    return this.lostTo;
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops renewing and gives the lease up (best effort: unless deleted, it lapses within its period). */
  async release(): Promise<void> {
    this.stop();
    if (this.lostTo) return;
    await within(this.database, this.timeoutMs, (db) =>
      db.$executeRawUnsafe(
        `DELETE FROM ${BALANCE_LEASE_TABLE} WHERE fleet = $1 AND run = $2 AND token = $3::bigint`,
        FLEET,
        this.run,
        this.token,
      ),
    ).catch(() => {});
  }
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
