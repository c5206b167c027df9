// A client that stops reading its event stream costs at most one snapshot, however many are made
// meanwhile, and gets the newest once it reads again; a client address holds at most its streams.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { SnapshotStream, StreamLimit } from "./stream.js";

/** A socket whose client reads only when told: each write waits until `read()`. */
function slowClient(highWaterMark = 1024) {
  const received: string[] = [];
  const waiting: (() => void)[] = [];
  const socket = new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, done) {
      received.push(chunk.toString());
      waiting.push(done);
    },
  });
  return {
    socket,
    received,
    /** The client takes everything written so far. */
    read() {
      for (const done of waiting.splice(0)) done();
    },
  };
}

describe("SnapshotStream", () => {
  it("writes each snapshot while the client keeps up", () => {
    const client = slowClient();
    let seq = 0;
    const stream = new SnapshotStream(
      client.socket,
      () => client.socket.writableLength,
      () => `{"seq":${seq}}`,
      [client.socket],
    );
    for (seq = 1; seq <= 3; seq++) {
      stream.offer();
      client.read();
    }
    expect(client.received).toEqual([1, 2, 3].map((n) => `event: snapshot\ndata: {"seq":${n}}\n\n`));
  });

  it("a client that stops reading holds one snapshot, and gets the newest when it reads again", async () => {
    const client = slowClient(64);
    const big = "x".repeat(10_000);
    let seq = 0;
    const stream = new SnapshotStream(
      client.socket,
      () => client.socket.writableLength,
      () => `{"seq":${seq},"pad":"${big}"}`,
      [client.socket],
    );
    for (seq = 1; seq <= 500; seq++) stream.offer();
    // 500 snapshots made, one written and not read: memory is one snapshot, not 500.
    expect(stream.unreadBytes()).toBeLessThan(big.length + 100);
    expect(client.received).toHaveLength(1);
    seq = 777;
    // The client reads: the writable empties, `drain` fires, and the newest snapshot goes out.
    const drained = new Promise<void>((resolve) => client.socket.once("drain", () => resolve()));
    client.read();
    await drained;
    expect(client.received).toHaveLength(2);
    expect(client.received[1]).toContain('"seq":777');
    client.read();
    stream.end();
    expect(stream.unreadBytes()).toBe(0);
  });
});

describe("StreamLimit", () => {
  it("refuses a client past its streams, and gives the place back when one ends", () => {
    const limit = new StreamLimit(2);
    expect(limit.take("10.0.0.1")).toBe(true);
    expect(limit.take("10.0.0.1")).toBe(true);
    expect(limit.take("10.0.0.1")).toBe(false);
    expect(limit.take("10.0.0.2")).toBe(true);
    limit.give("10.0.0.1");
    expect(limit.take("10.0.0.1")).toBe(true);
    expect(limit.take("10.0.0.1")).toBe(false);
  });
});
