import { AsyncLocalStorage } from "node:async_hooks";
import { type PhysicalShard, type ShardClient, withDeadline } from "@shardkit/prisma";

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

const deadlines = new AsyncLocalStorage<Deadline>();

/**
 * `work()`, with every statement it sends through `raw` (and every transaction, as a whole) bounded
 * by `deadline`: a database that hangs (its server frozen, a lock that is never given) fails the
 * work in bounded time with `deadline.late(database)`. The statement itself cannot be taken back
 * and may still finish (with the rest of its transaction's callback): what the work does next must
 * be safe either way (a move's steps hold its lease's row until they commit, so its undo waits for
 * a late one and undoes it).
 */
export function bounded<T>(deadline: Deadline, work: () => Promise<T>): Promise<T> {
  return deadlines.run(deadline, work);
}

/** `work()` outside any deadline of the work that runs it (a lease's renewals outlive a move's phase). */
export function unbounded<T>(work: () => T): T {
  return deadlines.exit(work);
}

/** A database's client, as `Raw`: bounded by the deadline of the work that asks for it, if any (`bounded`). */
export function raw<Client extends ShardClient>(physical: PhysicalShard<Client>): Raw {
  const client = physical.client as unknown as Raw;
  const deadline = deadlines.getStore();
  if (!deadline) return client;
  const within = <T>(run: () => Promise<T>): Promise<T> => {
    const left = deadline.at - performance.now();
    if (!(left > 0)) return Promise.reject(deadline.late(physical.name));
    return withDeadline(left, () => deadline.late(physical.name), run);
  };
  return {
    $queryRawUnsafe: (sql, ...values) => within(() => client.$queryRawUnsafe(sql, ...values)),
    $executeRawUnsafe: (sql, ...values) => within(() => client.$executeRawUnsafe(sql, ...values)),
    $transaction: (fn, options) => within(() => client.$transaction(fn, options)),
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
