import { ShardedUUID, type ShardIdentifier } from "@shardkit/id";
import { encodeJson } from "./codec.js";
import { InvalidEventError, MissingModelError } from "./errors.js";
import { type ShardRef, toShard } from "./registry.js";

/** An event to write to the outbox, in the same shard transaction as the state it describes. */
export interface OutboxEventInput {
  /** e.g. "wallet.debited" */
  topic: string;
  /** The entity the event is about: a ShardedUUID. */
  aggregateId: string;
  /** Any JSON value; bigints and Dates survive the trip. */
  payload: unknown;
}

/** An event as the relay hands it to `deliver`. */
export interface OutboxMessage<Payload = unknown> {
  id: string;
  topic: string;
  aggregateId: string;
  payload: Payload;
  createdAt: Date;
  /** Deliveries tried before this one. */
  attempts: number;
  /** The shard whose transaction wrote it. */
  shard: ShardIdentifier;
}

/** The `data` of an OutboxEvent row for `event`, with an ID on `shardOrId`'s shard. */
export function outboxRecord(shardOrId: ShardRef, event: OutboxEventInput) {
  if (!event || typeof event.topic !== "string" || event.topic.length === 0) {
    throw new InvalidEventError("topic must be a non-empty string");
  }
  if (!ShardedUUID.isValid(event.aggregateId)) {
    throw new InvalidEventError(
      `aggregateId must be a ShardedUUID, got ${JSON.stringify(event.aggregateId)}`,
    );
  }
  return {
    id: ShardedUUID.generate(toShard(shardOrId)),
    topic: event.topic,
    aggregateId: event.aggregateId,
    payload: encodeJson(event.payload),
  };
}

type TxWithOutbox = {
  outboxEvent: { create(args: { data: ReturnType<typeof outboxRecord> }): PromiseLike<unknown> };
};

/**
 * Writes an event in the shard transaction `tx` (from `$transactionOn` or `unit.on`): it commits
 * or rolls back with the state. Returns the event's ID.
 */
export async function emitEvent(tx: unknown, shardOrId: ShardRef, event: OutboxEventInput): Promise<string> {
  const data = outboxRecord(shardOrId, event);
  const outbox = (tx as Partial<TxWithOutbox>).outboxEvent;
  if (!outbox) {
    throw new MissingModelError("OutboxEvent");
  }
  await outbox.create({ data });
  return data.id;
}
