import { AsyncLocalStorage } from "node:async_hooks";
import type { Database, ShardClient } from "@shardkit/prisma";
import { pooledRaw, withDeadline } from "@shardkit/prisma/internal";

/** What the package asks of a database's Prisma client: raw statements and interactive transactions. */
export type Raw = {
  $queryRawUnsafe<T>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
  $transaction<R>(fn: (tx: Raw) => Promise<R>, options?: object): Promise<R>;
};

/**
 * When the statements of a piece of work (a move's phase, the map's installation) must have
 * answered, read as each statement starts: a move moves its deadline on from phase to phase.
 */
export interface Deadline {
  /** The moment (`performance.now()`) by which a statement must have answered. */
  readonly at: number;
  /** The error of a statement to `database` that did not answer in time. */
  late(database: string): Error;
}

/** The deadline of the work under way, and whether a transaction it runs in was given up. */
interface Bound {
  deadline: Deadline;
  givenUp(): boolean;
}

const deadlines = new AsyncLocalStorage<Bound>();

/**
 * `work()`, with every statement it sends through `raw` (and every transaction, as a whole) bounded
 * by `deadline`: a database that hangs (its server frozen, a lock that is never given) fails the
 * work in bounded time with `deadline.late(database)`. A transaction given up that way is never
 * committed by its callback: the callback's next statement, and its end, fail instead (a statement
 * the server is running cannot be taken back, so neither can a COMMIT already sent).
 */
export function bounded<T>(deadline: Deadline, work: () => Promise<T>): Promise<T> {
  return deadlines.run({ deadline, givenUp: () => false }, work);
}

/** `work()` outside any deadline of the work that runs it (a lease's renewals outlive a move's phase). */
export function unbounded<T>(work: () => T): T {
  return deadlines.exit(work);
}

/** A database's client, as `Raw`: bounded by the deadline of the work that asks for it, if any (`bounded`). */
export function raw<Client extends ShardClient>(physical: Database<Client>): Raw {
  return boundRaw(physical.client as unknown as Raw, physical.name);
}

/**
 * The partition map's own statements to a database (its open, reads, checks and announcements), as
 * `raw`: through its client's pool without starting the client's Prisma engine, for a client that
 * shares its pool (`openShards`' clients: `pooledRaw`); else through the client. An open then starts
 * no engine and opens one connection per database, which the engine takes over at its first call.
 */
export function mapRaw<Client extends ShardClient>(physical: Database<Client>): Raw {
  const pooled = pooledRaw(physical.client) as Raw | undefined;
  return boundRaw(pooled ?? (physical.client as unknown as Raw), physical.name);
}

function boundRaw(client: Raw, database: string): Raw {
  const bound = deadlines.getStore();
  return bound ? within(client, database, bound) : client;
}

/** `client` whose statements and transactions answer by `bound`'s deadline, or fail. */
function within(client: Raw, database: string, bound: Bound): Raw {
  const { deadline } = bound;
  const timed = <T>(run: () => Promise<T>, gaveUp?: () => void): Promise<T> => {
    const left = deadline.at - performance.now();
    if (bound.givenUp() || !(left > 0)) return Promise.reject(deadline.late(database));
    return withDeadline(
      left,
      () => {
        gaveUp?.();
        return deadline.late(database);
      },
      run,
    );
  };
  return {
    $queryRawUnsafe: (sql, ...values) => timed(() => client.$queryRawUnsafe(sql, ...values)),
    $executeRawUnsafe: (sql, ...values) => timed(() => client.$executeRawUnsafe(sql, ...values)),
    $transaction: (fn, options) => {
      let late = false;
      const inner: Bound = { deadline, givenUp: () => late || bound.givenUp() };
      const guard = (tx: Raw): Raw => {
        const ongoing = <T>(run: () => Promise<T>): Promise<T> =>
          inner.givenUp() ? Promise.reject(deadline.late(database)) : run();
        return {
          $queryRawUnsafe: (sql, ...values) => ongoing(() => tx.$queryRawUnsafe(sql, ...values)),
          $executeRawUnsafe: (sql, ...values) => ongoing(() => tx.$executeRawUnsafe(sql, ...values)),
          $transaction: (f, o) => ongoing(() => tx.$transaction(f, o)),
        };
      };
      return timed(
        () =>
          client.$transaction(
            (tx) =>
              deadlines.run(inner, async () => {
                const result = await fn(guard(tx));
                // Given up meanwhile: rolled back, never committed behind the back of its caller.
                if (inner.givenUp()) throw deadline.late(database);
                return result;
              }),
            options,
          ),
        () => {
          late = true;
        },
      );
    },
  };
}

/** An error's message on one line: the database's own words under a driver's wrapping. */
export function lastLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error ?? "failed");
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? "failed"
  );
}
