// The one place load windows are counted over a span of time and turned into the figure a balance
// balances and a dashboard draws: the share of a window inside the span (one rule at both edges),
// the figure by measure, and its unit. The balancer, the dashboard and the CLI use these; the SQL
// sum (summary.ts) applies the same rule in the database.

/** What a shard's load is measured by: time its calls spent in the database, calls, or writes (each per second). */
export type LoadMeasure = "time" | "calls" | "writes";

/** The unit of a load figure of each measure (a rate: per second of the span measured). */
export const LOAD_UNITS: Readonly<Record<LoadMeasure, string>> = {
  time: "db ms/s",
  calls: "calls/s",
  writes: "writes/s",
};

/** The counts a figure is made of (a window's, a shard's summary). */
export interface LoadCounts {
  calls: number;
  writes: number;
  /** Time in the database (ms). */
  dbMs: number;
}

/** The count `by` measures: database ms, calls or writes. */
export function loadCount(by: LoadMeasure, counts: LoadCounts): number {
  return by === "time" ? counts.dbMs : by === "calls" ? counts.calls : counts.writes;
}

/** The load figure: the count `by` measures per second of a span of `spanMs`. */
export function loadFigure(by: LoadMeasure, counts: LoadCounts, spanMs: number): number {
  return spanMs > 0 ? loadCount(by, counts) / (spanMs / 1000) : 0;
}

/**
 * The share (0..1) of a window `[start, start + lengthMs)` inside the span `[from, to)`: its counts
 * are spread evenly over its length, so a window that began before the span, or ends after it (a
 * router whose window was still open when the span was read), counts for its part inside only. A
 * window of no length counts whole when it lies strictly inside the span.
 */
export function windowShare(start: number, lengthMs: number, from: number, to: number): number {
  if (!(lengthMs > 0)) return start > from && start < to ? 1 : 0;
  const inside = Math.min(start + lengthMs, to) - Math.max(start, from);
  return inside <= 0 ? 0 : inside >= lengthMs ? 1 : inside / lengthMs;
}

/** A window with the counts `windowShare` pro-rates (latency sketches stay whole: quantiles do not scale). */
export interface ProratedWindow extends LoadCounts {
  windowStart: Date;
  windowMs: number;
  rowsWritten: number;
  top: readonly { key: string; count: number; error: number }[];
}

/**
 * The windows as counted inside `[from, to)`: each one whole, pro-rated by `windowShare` (calls,
 * writes, rows, database time and its heavy hitters' counts), or left out when none of it is inside.
 */
export function windowsWithin<W extends ProratedWindow>(
  windows: readonly W[],
  from: number,
  to: number,
): W[] {
  const out: W[] = [];
  for (const w of windows) {
    const share = windowShare(w.windowStart.getTime(), w.windowMs, from, to);
    if (share === 1) out.push(w);
    else if (share > 0)
      out.push({
        ...w,
        calls: w.calls * share,
        writes: w.writes * share,
        rowsWritten: w.rowsWritten * share,
        dbMs: w.dbMs * share,
        top: w.top.map((k) => ({ key: k.key, count: k.count * share, error: k.error * share })),
      });
  }
  return out;
}
