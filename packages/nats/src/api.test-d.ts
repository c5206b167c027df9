import type { NatsConnection } from "@nats-io/nats-core";
import { createOutboxRelay, type ShardRegistry, shardRouting } from "@shardkit/prisma";
import { describe, expectTypeOf, it } from "vitest";
import type { PrismaClient } from "../examples/generated/prisma/client.js";
import {
  consumeEvents,
  type EventConsumer,
  jetStreamSink,
  type PublishReceipt,
  type ReceivedEvent,
} from "./index.js";

declare const nc: NatsConnection;
declare const client: PrismaClient;
declare const registry: ShardRegistry<PrismaClient>;
const db = client.$extends(shardRouting({ registry, models: { Account: { keys: ["id"] } } }));

describe("the API types", () => {
  it("jetStreamSink is a deliver function for createOutboxRelay; onPublished gets the receipt", () => {
    const deliver = jetStreamSink({
      connection: nc,
      onPublished: (message, receipt) => {
        expectTypeOf(message.id).toBeString();
        expectTypeOf(receipt).toEqualTypeOf<PublishReceipt>();
      },
    });
    createOutboxRelay({ registry, deliver });
  });

  it("consumeEvents takes its transaction client from the routed client, and the payload type from shardOf", () => {
    type Deposit = { account: string; amount: bigint };
    const consumer = consumeEvents({
      connection: nc,
      stream: "S",
      consumer: "ledger",
      db,
      shardOf: (event: ReceivedEvent<Deposit>) => event.payload.account,
      apply: async (tx, event) => {
        expectTypeOf(tx).not.toBeAny();
        expectTypeOf(tx.account.update).toBeFunction();
        expectTypeOf(event.payload).toEqualTypeOf<Deposit>();
        // @ts-expect-error the transaction client has no $transactionOn
        tx.$transactionOn;
      },
    });
    expectTypeOf(consumer).resolves.toEqualTypeOf<EventConsumer>();
  });
});
