// A metric reader for tests: what a meter provider recorded, read on demand.
import { AggregationTemporality, type DataPoint, MetricReader } from "@opentelemetry/sdk-metrics";

/** Collects cumulative metrics when asked (`points`), with no exporter behind it. */
export class TestMetricReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
  /** The data points of metric `name`. */
  async points(name: string): Promise<DataPoint<unknown>[]> {
    const { resourceMetrics } = await this.collect();
    const found = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (found?.dataPoints ?? []) as DataPoint<unknown>[];
  }
}
