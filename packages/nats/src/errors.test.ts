import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import type { OutboxMessage } from "@shardkit/prisma";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { decodeEvent } from "./consume.js";
import * as errors from "./errors.js";
import { jetStreamSink } from "./sink.js";
import { ensureStream } from "./stream.js";

// Every code of @shardkit/nats, raised through the public API against the machine's NATS server.
const run = `${process.pid}_${Date.now().toString(36)}`;
const prefix = `skerr_${run}`;
const stream = `SK_ERR_${run}`;
let nc: NatsConnection;
beforeAll(async () => {
  nc = await connect({ servers: inject("natsUrl") });
  await ensureStream(nc, { name: stream, subjects: [`${prefix}.>`] });
});
afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const name of [stream, `${stream}_OVERLAP`]) await jsm.streams.delete(name).catch(() => {});
  await nc.close();
});

const shard = ShardIdentifier.of(0, 3);
const message = (topic = "thing.happened"): OutboxMessage => ({
  id: ShardedUUID.generate(shard),
  topic,
  aggregateId: ShardedUUID.generate(shard),
  payload: { n: 1n },
  createdAt: new Date(),
  attempts: 0,
  shard,
});

const byCode: ErrorTable<errors.NatsErrorCode> = {
  PUBLISH_TIMEOUT: [
    errors.PublishTimeoutError,
    async () => {
      // Something answers nothing on a subject no stream captures: the request waits out its timeout.
      const silent = nc.subscribe(`${prefix}_silent.>`);
      try {
        await jetStreamSink({ connection: nc, prefix: `${prefix}_silent`, timeoutMs: 200 })(message());
      } finally {
        silent.unsubscribe();
      }
    },
  ],
  BROKER_UNAVAILABLE: [
    errors.BrokerUnavailableError,
    async () => {
      const closed = await connect({ servers: inject("natsUrl") });
      await closed.close();
      await jetStreamSink({ connection: closed, prefix })(message());
    },
  ],
  NO_STREAM: [
    errors.NoStreamError,
    () => jetStreamSink({ connection: nc, prefix: `${prefix}_none` })(message()),
  ],
  PUBLISH_REJECTED: [
    errors.PublishRejectedError,
    () => jetStreamSink({ connection: nc, prefix, stream: "NOT_THIS_ONE" })(message()),
  ],
  INVALID_SUBJECT: [
    errors.InvalidSubjectError,
    () => jetStreamSink({ connection: nc, prefix })(message("a b")),
  ],
  INVALID_NATS_OPTIONS: [errors.NatsOptionsError, () => jetStreamSink({} as never)],
  INVALID_EVENT_MESSAGE: [
    errors.InvalidEventMessageError,
    () => decodeEvent({ subject: "x", headers: undefined, data: new Uint8Array() }),
  ],
  JETSTREAM_SETUP: [
    errors.JetStreamSetupError,
    // A second stream over the same subjects: JetStream refuses overlapping streams.
    () => ensureStream(nc, { name: `${stream}_OVERLAP`, subjects: [`${prefix}.>`] }),
  ],
};

describeErrorRules(errors, byCode, import.meta.url);

describe("NatsError", () => {
  it("keeps the NATS client's error as its cause, and the details of each kind", async () => {
    const timeout = (await Promise.resolve(byCode.PUBLISH_TIMEOUT[1]()).catch(
      (e) => e,
    )) as errors.PublishTimeoutError;
    expect(timeout.subject).toBe(`${prefix}_silent.thing.happened`);
    expect((timeout.cause as Error).name).toBe("TimeoutError");
    const rejected = (await Promise.resolve(byCode.PUBLISH_REJECTED[1]()).catch(
      (e) => e,
    )) as errors.PublishRejectedError;
    expect(rejected.apiCode).toBe(10060);
    expect(rejected.subject).toBe(`${prefix}.thing.happened`);
    expect((rejected.cause as Error).name).toBe("JetStreamApiError");
    const none = (await Promise.resolve(byCode.NO_STREAM[1]()).catch((e) => e)) as errors.NoStreamError;
    expect((none.cause as Error).name).toBe("JetStreamNotEnabled");
  });
});
