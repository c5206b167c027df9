import { AggregationTemporality, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { ShardedId } from "@shardkit/id";
import { shardRouting } from "@shardkit/prisma";
import { beforeEach, describe, expect, it } from "vitest";
import { models, reset, routers, S, transfer } from "../test/world.js";

/** A reader that collects on demand: the cumulative sum of a counter per shard. */
class Reader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
  async count(name: string, shard: string): Promise<number> {
    const { resourceMetrics } = await this.collect();
    const metric = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? [])
      .filter((p) => p.attributes["shardkit.shard"] === shard)
      .reduce((n, p) => n + (p.value as number), 0);
  }
}

const make = routers();
beforeEach(() => reset());

describe("shardkit.ownership.stale_rejections", () => {
  it("counts a real refusal: a stale router's write reaches the former owner, is refused, refreshes and lands at the new owner", async () => {
    const reader = new Reader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const mover = make();
    const stale = make();
    const map = await mover.open();
    const staleMap = await stale.open(); // read now and never refreshed: it will still send 0/1 to a
    const db = stale.clients.a.$extends(
      shardRouting({ registry: stale.registry, models, telemetry: { meterProvider } }),
    );
    const id = ShardedId.generate("Bucket", S.g0m1);
    await db.bucket.create({ data: { id, name: "B-173", remaining: 5 } });
    expect(await reader.count("shardkit.ownership.stale_rejections", "0/1")).toBe(0);

    // 0/1 moves from a to e, by a mover the stale router is not told about.
    await transfer(map, S.g0m1, mover.databases.e);

    expect(stale.registry.databaseOf(S.g0m1).name).toBe("a");
    const updated = await db.bucket.update({ where: { id }, data: { remaining: 4 } });
    expect(updated.remaining).toBe(4);
    expect(stale.registry.databaseOf(S.g0m1).name).toBe("e");
    expect((await mover.clients.e.bucket.findUnique({ where: { id } }))?.remaining).toBe(4);
    expect((await mover.clients.a.bucket.findUnique({ where: { id } }))?.remaining).toBe(5); // refused there
    expect(await reader.count("shardkit.ownership.stale_rejections", "0/1")).toBe(1);
    expect(await reader.count("shardkit.ownership.stale_rejections", "0/0")).toBe(0);
    expect(staleMap.counters).toMatchObject({ staleRejections: 1, retries: 1 });

    // Now current: the next write goes straight to e, and nothing more is counted.
    await db.bucket.update({ where: { id }, data: { remaining: 3 } });
    expect(await reader.count("shardkit.ownership.stale_rejections", "0/1")).toBe(1);
    await meterProvider.shutdown();
    for (const m of [map, staleMap]) m.close();
  });
});
