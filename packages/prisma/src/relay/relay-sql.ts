// The relay's SQL on one database's outbox: claiming a batch, recording a group of outcomes,
// releasing what a batch had no time for, the lag and the redrive of dead letters; each only on the
// shards the database owns now.
import { shardBitsSql } from "../sql.js";

/** The raw SQL a shard's client runs for the relay. */
export type Raw = {
  $queryRawUnsafe<T = unknown>(sql: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number>;
};
/** A claimed event, as `CLAIM` returns it. */
export type Row = {
  id: string;
  topic: string;
  aggregateId: string;
  payload: string;
  createdAt: Date;
  attempts: number;
};

// A claim is a lease, committed before anything is delivered: the events' `availableAt` moves
// past the lease and `attempts` counts the attempt. No row lock is held while delivering; a relay
// that dies leaves its events to be claimed again when the lease ends. `attempts` fences every
// outcome: an outcome reported after the lease was lost (and the event claimed again) changes nothing.
// (UPDATE ... RETURNING keeps no order: the claimed events are sorted again, oldest first.)
/**
 * Only the events of shards the database owns now: after a shard moved away, its old copy stays
 * until it is cleaned up, and it is the new owner's relay that delivers its events.
 */
const OWNED = `${shardBitsSql("id")} = ANY($3::int[])`;
export const CLAIM = `WITH claimed AS (
    UPDATE "OutboxEvent" SET "availableAt" = now() + ($2::int * interval '1 millisecond'), attempts = attempts + 1
    WHERE id IN (SELECT id FROM "OutboxEvent" WHERE status = 'pending' AND "availableAt" <= now()
                   AND ${OWNED}
                 ORDER BY "createdAt", id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING id, topic, "aggregateId", payload, "createdAt", attempts)
  SELECT id::text AS id, topic, "aggregateId"::text AS "aggregateId", payload, "createdAt", attempts
  FROM claimed ORDER BY "createdAt", id`;
/**
 * The outcomes of a group of deliveries, in one statement: `delivered`, or failed (`pending` again
 * after its delay in ms, or `dead`) with its error. Each is fenced by its attempt count, as above.
 * (Arrays, one element per event: ids, attempts, statuses, errors ("" for a delivery), delays.)
 */
export const RECORD = `UPDATE "OutboxEvent" o SET status = r.status,
    "deliveredAt" = CASE WHEN r.status = 'delivered' THEN now() ELSE o."deliveredAt" END,
    "lastError" = CASE WHEN r.status = 'delivered' THEN o."lastError" ELSE r.error END,
    "availableAt" = CASE WHEN r.status = 'delivered' THEN o."availableAt"
                         ELSE now() + (r.delay * interval '1 millisecond') END
  FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::int[]) AS r(id, attempts, status, error, delay)
  WHERE o.id = r.id AND o.attempts = r.attempts AND o.status = 'pending'`;
/** Claimed events the batch had no time left to deliver: back to pending, the attempt not counted. */
export const RELEASE = `UPDATE "OutboxEvent" o SET "availableAt" = now(), attempts = o.attempts - 1
  FROM unnest($1::uuid[], $2::int[]) AS r(id, attempts)
  WHERE o.id = r.id AND o.attempts = r.attempts AND o.status = 'pending'`;
export const LAG = `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
  count(*) FILTER (WHERE status = 'dead')::int AS dead,
  coalesce(extract(epoch FROM now() - min("createdAt") FILTER (WHERE status = 'pending')) * 1000, 0)::float8 AS oldest
  FROM "OutboxEvent" WHERE ${shardBitsSql("id")} = ANY($1::int[])`;
export const REDRIVE = `UPDATE "OutboxEvent" SET status = 'pending', attempts = 0, "availableAt" = now(), "lastError" = NULL
  WHERE status = 'dead' AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[])) AND ($2::text IS NULL OR topic = $2)
    AND ${shardBitsSql("id")} = ANY($3::int[])`;
