import { headers } from "@nats-io/nats-core";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { encodeJson } from "@shardkit/prisma";
import { describe, expect, it } from "vitest";
import { decodeEvent } from "./consume.js";
import { InvalidEventMessageError } from "./errors.js";
import { EVENT_HEADERS, invalidSubject } from "./sink.js";

const text = new TextEncoder();

describe("the payload's wire form", () => {
  it("is the outbox's own encoding: decodeEvent restores what encodeJson stored, bigints and Dates at any depth", () => {
    const payload = {
      amount: 12345678901234567890n,
      at: new Date("2026-01-02T03:04:05.678Z"),
      list: [1n, "x", null, { when: new Date(0) }],
    };
    const shard = ShardIdentifier.of(0, 1);
    const h = headers();
    h.set(EVENT_HEADERS.id, ShardedUUID.generate(shard));
    h.set(EVENT_HEADERS.topic, "a.b");
    h.set(EVENT_HEADERS.aggregateId, ShardedUUID.generate(shard));
    h.set(EVENT_HEADERS.createdAt, "2026-01-02T03:04:05.678Z");
    const event = decodeEvent({ subject: "outbox.a.b", headers: h, data: text.encode(encodeJson(payload)) });
    expect(event.payload).toEqual(payload);
  });
});

describe("decodeEvent", () => {
  const shard = ShardIdentifier.of(2, 5);
  const id = ShardedUUID.generate(shard);
  const aggregateId = ShardedUUID.generate(shard);
  const valid = () => {
    const h = headers();
    h.set(EVENT_HEADERS.id, id);
    h.set(EVENT_HEADERS.topic, "a.b");
    h.set(EVENT_HEADERS.aggregateId, aggregateId);
    h.set(EVENT_HEADERS.shard, shard.key);
    h.set(EVENT_HEADERS.createdAt, "2026-01-02T03:04:05.678Z");
    return h;
  };

  it("reads the event from the headers and the body", () => {
    const event = decodeEvent({
      subject: "outbox.a.b",
      headers: valid(),
      data: text.encode('{"n":{"$bigint":"7"}}'),
      info: { streamSequence: 9, deliveryCount: 2 },
    });
    expect(event).toEqual({
      id,
      topic: "a.b",
      aggregateId,
      payload: { n: 7n },
      createdAt: new Date("2026-01-02T03:04:05.678Z"),
      shard,
      subject: "outbox.a.b",
      streamSequence: 9,
      deliveryCount: 2,
    });
  });

  it.each([
    ["no headers", () => undefined, "{}", /no Nats-Msg-Id header/],
    [
      "an ID that is not a ShardedUUID",
      () => set(EVENT_HEADERS.id, crypto.randomUUID()),
      "{}",
      /not a ShardedUUID/,
    ],
    [
      "a shard header that is not the ID's shard",
      () => set(EVENT_HEADERS.shard, "0/0"),
      "{}",
      /not the shard/,
    ],
    ["no topic", () => del(EVENT_HEADERS.topic), "{}", /no Shardkit-Topic/],
    ["a date that is not a date", () => set(EVENT_HEADERS.createdAt, "soon"), "{}", /not a date/],
    ["a body that is not JSON", () => valid(), "{", /not JSON/],
  ])("refuses a message with %s", (_, make, body, why) => {
    const error = (() => {
      try {
        decodeEvent({ subject: "s", headers: make(), data: text.encode(body) });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(InvalidEventMessageError);
    expect((error as Error).message).toMatch(why);
  });

  function set(name: string, value: string) {
    const h = valid();
    h.set(name, value);
    return h;
  }
  function del(name: string) {
    const h = valid();
    h.delete(name);
    return h;
  }
});

describe("invalidSubject", () => {
  it("accepts publishable subjects and says why others are not", () => {
    expect(invalidSubject("outbox.wallet.debited")).toBeUndefined();
    expect(invalidSubject("a-b_c.d:e")).toBeUndefined();
    expect(invalidSubject("")).toMatch(/empty/);
    expect(invalidSubject("a b")).toMatch(/whitespace/);
    expect(invalidSubject("a.\u0007")).toMatch(/control/);
    expect(invalidSubject(".a")).toMatch(/empty token/);
    expect(invalidSubject("a.>")).toMatch(/wildcard/);
  });
});
