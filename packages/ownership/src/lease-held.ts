// A held lease as the steps of a change of owner see it (`Held`: which move, under which token, and
// the lease's guard), and the two transactions every step runs in: at the source after the lease's
// check, and at the target nested in one at the source that holds the lease's row until the target
// has committed. `ShardLease` (lease.ts) makes one for each step it runs.
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { type Raw, raw } from "./raw.js";
import type { LeaseMap } from "./records.js";

/** What a step of a move needs of the lease it runs under. */
export interface Held<Client extends ShardClient> {
  readonly map: LeaseMap<Client>;
  readonly shard: ShardIdentifier;
  /** The source: where the lease lives. */
  readonly from: Database<Client>;
  readonly to: Database<Client>;
  readonly attempt: string;
  /** The fencing token the lease holds the move with. */
  readonly token: number;
  readonly leaseMs: number;
  /** The lease's guard (`ShardLease.check`): still this mover's, renewed, its row locked until `tx` ends. */
  check(tx: Raw, step?: string): Promise<void>;
}

/** `fn` in a change of the source's records (its change lock), after the lease's check. */
export function atSource<Client extends ShardClient, R>(
  held: Held<Client>,
  fn: (tx: Raw) => Promise<R>,
  options: { list?: number; relist?: boolean; step?: string } = {},
): Promise<R> {
  return held.map.changes.change(
    held.from,
    async (tx) => {
      await held.check(tx, options.step);
      return fn(tx);
    },
    options,
  );
}

/**
 * `fn` in a transaction at the target (a change of its records, under its change lock; or, with
 * `change: false`, a plain transaction), nested in one at the source that checked the lease and
 * holds its row locked until the target has committed: no other mover can take the move over in
 * between. `fn` gets the source's transaction too.
 *
 * The target's fence list is brought in line outside the source's transaction, which must not wait
 * idle (it is ended past the lease): `list` before it (listing is always safe; its DDL may wait for
 * the table's writers, or a vacuum), the rest after it has committed (a shard listed for nothing
 * only costs its writes a look at its record until the next change tidies it).
 */
export async function atTarget<Client extends ShardClient, R>(
  held: Held<Client>,
  fn: (tx: Raw, source: Raw) => Promise<R>,
  options: { list?: number; change?: boolean; relist?: boolean } = {},
): Promise<R> {
  const { map } = held;
  const changing = options.change !== false;
  if (changing && options.list !== undefined) await map.changes.relist(held.to, [options.list]);
  const bounded = async (tx: Raw) => {
    await tx.$executeRawUnsafe(`SET LOCAL idle_in_transaction_session_timeout = '${held.leaseMs}ms'`);
    return fn(tx, source);
  };
  let source!: Raw;
  const result = await map.changes.locked(held.from, async (locked) => {
    source = locked;
    await held.check(source);
    if (!changing) return raw(held.to).$transaction(bounded, { timeout: 60_000, maxWait: 30_000 });
    return map.changes.change(held.to, bounded, {
      ...(options.list !== undefined ? { list: options.list } : {}),
      relist: false,
    });
  });
  if (changing && options.relist !== false) await map.changes.relist(held.to).catch(() => {});
  return result;
}

/** The attempt as the records store it: an earlier version's move has none (`""`), recorded as null. */
export const nullIfEmpty = (attempt: string) => (attempt === "" ? null : attempt);
