import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JetStreamSetupError, NatsOptionsError } from "./errors.js";
import { ensureStream } from "./stream.js";

const run = `${process.pid}_${Date.now().toString(36)}`;
const name = `SK_ENSURE_${run}`;
let nc: NatsConnection;
beforeAll(async () => {
  nc = await connect({ servers: inject("natsUrl") });
});
afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(name).catch(() => {});
  await nc.close();
});

describe("ensureStream", () => {
  it("creates the stream with its duplicate window (2 minutes by default)", async () => {
    const info = await ensureStream(nc, { name, subjects: [`ens_${run}.a.>`], config: { max_msgs: 1000 } });
    expect(info.config.duplicate_window).toBe(120_000 * 1e6);
    expect(info.config.subjects).toEqual([`ens_${run}.a.>`]);
    expect(info.config.max_msgs).toBe(1000);
  });

  it("on an existing stream: adds missing subjects and lengthens a shorter window, never shortens or removes, keeps the rest", async () => {
    const same = await ensureStream(nc, { name, subjects: [`ens_${run}.a.>`] });
    expect(same.config.duplicate_window).toBe(120_000 * 1e6);
    const grown = await ensureStream(nc, {
      name,
      subjects: [`ens_${run}.b.>`],
      duplicateWindowMs: 300_000,
    });
    expect(grown.config.subjects).toEqual([`ens_${run}.a.>`, `ens_${run}.b.>`]);
    expect(grown.config.duplicate_window).toBe(300_000 * 1e6);
    expect(grown.config.max_msgs).toBe(1000);
    const kept = await ensureStream(nc, { name, subjects: [`ens_${run}.a.>`], duplicateWindowMs: 1000 });
    expect(kept.config.duplicate_window).toBe(300_000 * 1e6);
    expect(kept.config.subjects).toHaveLength(2);
  });

  it("two processes ensuring the same stream at once both get it", async () => {
    const other = `${name}_RACE`;
    try {
      const both = await Promise.all([
        ensureStream(nc, { name: other, subjects: [`ens_${run}.race.>`] }),
        ensureStream(nc, { name: other, subjects: [`ens_${run}.race.>`] }),
      ]);
      expect(both.map((i) => i.config.name)).toEqual([other, other]);
    } finally {
      await (await jetstreamManager(nc)).streams.delete(other).catch(() => {});
    }
  });

  it("refuses options that cannot work, and reports what JetStream refused", async () => {
    const error = await ensureStream(nc, { name: "a.b", subjects: [], duplicateWindowMs: 10 }).catch(
      (e) => e,
    );
    expect(error).toBeInstanceOf(NatsOptionsError);
    expect(error.issues).toHaveLength(3);
    const refused = await ensureStream(nc, {
      name: `${name}_AGE`,
      subjects: [`ens_${run}.age.>`],
      duplicateWindowMs: 60_000,
      config: { max_age: 1_000_000_000 }, // a window longer than max_age
    }).catch((e) => e);
    expect(refused).toBeInstanceOf(JetStreamSetupError);
  });
});
