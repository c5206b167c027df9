// The snapshot's figures from what was read, without a database: load pro-rated at the window's
// start as the balancer counts it, each database's series spread over the buckets a window covers,
// records that hold no date never ending the dashboard, and nothing of a URL's credentials.
import { ShardIdentifier } from "@shardkit/id";
import type { MoveJournalEntry } from "@shardkit/ownership";
import { LatencySketch, type ShardLoadWindow, sumWindows } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { afterAll, describe, expect, it } from "vitest";
import { openConfig } from "../config.js";
import { namesOf } from "./names.js";
import { assembleSnapshot, type Pieces, seriesBucketMs } from "./snapshot.js";

// Clients are made, never connected: nothing here reaches a database.
const opened = openConfig({
  env: {
    SHARDKIT_SHARDS: JSON.stringify([
      { group: 0, member: 0, url: "postgresql://app:s3cret@db-a:5432/orders" },
      { group: 0, member: 1, url: "postgresql://app:s3cret@db-b:5432/orders" },
    ]),
  },
});
afterAll(() => opened.close());
const [a, b] = opened.registry.databases;
const names = namesOf(opened);
const NOW = Date.now();
const WINDOW_MS = 60_000;

function window(shard: string, startAgoMs: number, lengthMs: number, calls: number): ShardLoadWindow {
  const sketch = new LatencySketch();
  sketch.record(1, calls);
  return {
    shard: ShardIdentifier.parse(shard),
    windowStart: new Date(NOW - startAgoMs),
    windowMs: lengthMs,
    router: "r",
    calls,
    writes: 0,
    rowsWritten: 0,
    dbMs: calls,
    sketch: sketch.toJSON(),
    top: [{ key: "k", count: calls, error: 0 }],
    config: "c",
  };
}

/** One database's windows as the database sums them over the load shown (what the collector reads). */
const summed = (windows: ShardLoadWindow[]) =>
  sumWindows(windows, { from: NOW - WINDOW_MS, to: NOW, topKeys: 5, bucketMs: seriesBucketMs(WINDOW_MS) });

function pieces(over: Partial<Pieces>): Pieces {
  return {
    registry: opened.registry,
    names,
    settings: {
      refreshMs: 1000,
      windowMs: WINDOW_MS,
      by: "calls",
      timeoutMs: patient(1000),
      tables: [],
      mode: "offline",
      allowActions: false,
    },
    source: "SHARDKIT_SHARDS",
    seq: 1,
    probes: new Map([
      [a!, { up: true, latencyMs: 1, answeredAt: new Date(NOW), connections: null }],
      [
        b!,
        {
          up: false,
          // As the collector records an error: through `names.clean`.
          error: names.clean(
            'password authentication failed for user "app" (postgresql://app:s3cret@db-b:5432/orders)',
          ),
          latencyMs: null,
          answeredAt: null,
          connections: null,
        },
      ],
    ]),
    view: null,
    viewError: null,
    lag: null,
    loads: new Map(),
    loadErrors: new Map(),
    journal: [],
    plan: null,
    run: null,
    // The snapshot's clock is the test's: the figures do not depend on how long the test took.
    now: NOW,
    ...over,
  };
}

describe("the dashboard's snapshot", () => {
  it("counts a window that began before the load shown for its part inside only, as the balancer does", () => {
    // 0/0: 600 calls in a window half inside; 0/1: 300 calls wholly inside.
    const snap = assembleSnapshot(
      pieces({
        loads: new Map([
          [a!, summed([window("0/0", WINDOW_MS + 5_000, 10_000, 600)])],
          [b!, summed([window("0/1", 20_000, 10_000, 300)])],
        ]),
      }),
    );
    const shard = (key: string) => snap.shards.find((s) => s.key === key)!;
    expect(shard("0/0").calls).toBe(300);
    expect(shard("0/0").load).toBe(300 / 60);
    expect(shard("0/0").top[0]).toMatchObject({ key: "k", share: 1 });
    expect(shard("0/1").calls).toBe(300);
    expect(shard("0/0").heat).toBe(1);
    expect(shard("0/1").heat).toBe(1);
    // The series carries the same calls as the shard figures, spread over the buckets they cover.
    const db = snap.databases.find((d) => d.name === "db-b:5432/orders")!;
    const bucketSeconds = (db.series.t[1]! - db.series.t[0]!) / 1000;
    const total = db.series.v.reduce((sum, v) => sum + v * bucketSeconds, 0);
    expect(total).toBeCloseTo(300, 0);
    expect(db.series.v.filter((v) => v > 0).length).toBeGreaterThanOrEqual(2);
  });

  it("counts a window still open past the snapshot's time for its part before it, as the balancer does", () => {
    // 0/1: 400 calls in a window that began 5 s ago and lasts 10 s (a router's clock ahead, or a
    // window flushed as the snapshot was made): half of it is inside the load shown.
    const snap = assembleSnapshot(
      pieces({ loads: new Map([[b!, summed([window("0/1", 5_000, 10_000, 400)])]]) }),
    );
    const shard = snap.shards.find((s) => s.key === "0/1")!;
    expect(shard.calls).toBe(200);
    expect(shard.load).toBe(200 / 60);
    expect(snap.unit).toBe("calls/s");
  });

  it("names a router whose clock is off its database's by more than 2 s", () => {
    const skewed = { ...window("0/0", 20_000, 10_000, 10), router: "host:1:ahead", skewMs: 3_600_000 };
    const fine = { ...window("0/0", 30_000, 10_000, 10), router: "host:2:fine", skewMs: 40 };
    const snap = assembleSnapshot(pieces({ loads: new Map([[a!, summed([skewed, fine])]]) }));
    const clock = snap.problems.filter((p) => p.kind === "clock");
    expect(clock.map((p) => p.text)).toEqual([
      expect.stringContaining("router host:1:ahead's clock is 1 h 0 min ahead of its database's"),
    ]);
  });

  it("a journal record holding no date is left out of the history, and the snapshot is still made", () => {
    const entry: MoveJournalEntry = {
      database: a!.name,
      shard: "0/0",
      attempt: "x",
      from: a!.name,
      to: b!.name,
      mode: "offline",
      step: "done",
      stepIndex: 9,
      steps: 10,
      rows: 1,
      lagBytes: null,
      holder: "h",
      startedAt: new Date(Number.NaN),
      updatedAt: new Date(Number.NaN),
      endedAt: new Date(Number.NaN),
      outcome: "moved",
      freezeMs: 1,
      durationMs: 2,
      error: null,
      endedBy: null,
      stopped: false,
    };
    const good = { ...entry, attempt: "y", endedAt: new Date(NOW) };
    const snap = assembleSnapshot(pieces({ journal: [entry, good] }));
    expect(snap.history).toHaveLength(1);
    expect(snap.history[0]).toMatchObject({
      from: "db-a:5432/orders",
      to: "db-b:5432/orders",
      outcome: "moved",
    });
  });

  it("names databases host:port/database and carries no user or password, even in errors", () => {
    const snap = assembleSnapshot(pieces({}));
    const text = JSON.stringify(snap);
    expect(snap.databases.map((d) => d.name)).toEqual(["db-a:5432/orders", "db-b:5432/orders"]);
    expect(snap.problems[0]).toMatchObject({ kind: "down", database: "db-b:5432/orders" });
    expect(text).not.toContain("s3cret");
    expect(text).not.toContain('"app"');
    expect(text).not.toContain("postgresql://");
    expect(snap.databases[1]!.error).toBe('password authentication failed for user "***" (db-b:5432/orders)');
    expect(names.clean('role "a""b" does not exist')).toBe('role "***" does not exist');
  });
});
