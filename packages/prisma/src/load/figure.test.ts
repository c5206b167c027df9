// The one rule a load window is counted by over a span (no database): whole inside, in part at
// either edge (a window that began before the span, one still open past its end), nothing outside;
// the figure per second of the span, in the unit of its measure.
import { describe, expect, it } from "vitest";
import { LOAD_UNITS, loadFigure, windowShare, windowsWithin } from "./figure.js";

const window = (start: number, windowMs: number, calls: number) => ({
  windowStart: new Date(start),
  windowMs,
  calls,
  writes: calls / 2,
  rowsWritten: calls,
  dbMs: calls * 3,
  top: [{ key: "k", count: calls, error: 0 }],
});

describe("windowShare", () => {
  it("counts a window inside whole, outside not at all", () => {
    expect(windowShare(1_000, 10_000, 0, 60_000)).toBe(1);
    expect(windowShare(-20_000, 10_000, 0, 60_000)).toBe(0);
    expect(windowShare(60_000, 10_000, 0, 60_000)).toBe(0);
  });

  it("counts a window across the span's start for its part inside", () => {
    expect(windowShare(-5_000, 10_000, 0, 60_000)).toBe(0.5);
  });

  it("counts a window past the span's end ('now') for its part inside too, by the same rule", () => {
    expect(windowShare(57_500, 10_000, 0, 60_000)).toBe(0.25);
    // A long window (a router kept it while its flushes failed) spanning the whole span.
    expect(windowShare(-10_000, 80_000, 0, 60_000)).toBe(0.75);
  });

  it("a window of no length counts whole when it lies strictly inside", () => {
    expect(windowShare(1, 0, 0, 60_000)).toBe(1);
    expect(windowShare(0, 0, 0, 60_000)).toBe(0);
    expect(windowShare(60_000, 0, 0, 60_000)).toBe(0);
  });
});

describe("windowsWithin", () => {
  it("pro-rates counts and heavy hitters at both edges, keeps inner windows as they are", () => {
    const inner = window(10_000, 10_000, 100);
    const [first, middle, last, ...rest] = windowsWithin(
      [window(-5_000, 10_000, 600), inner, window(55_000, 10_000, 200), window(70_000, 10_000, 50)],
      0,
      60_000,
    );
    expect(rest).toEqual([]);
    expect(first).toMatchObject({ calls: 300, writes: 150, rowsWritten: 300, dbMs: 900 });
    expect(first!.top).toEqual([{ key: "k", count: 300, error: 0 }]);
    expect(middle).toBe(inner);
    expect(last).toMatchObject({ calls: 100, dbMs: 300 });
  });
});

describe("loadFigure", () => {
  it("is the measured count per second of the span, labelled by its unit", () => {
    const counts = { calls: 600, writes: 60, dbMs: 1_200 };
    expect(loadFigure("calls", counts, 60_000)).toBe(10);
    expect(loadFigure("writes", counts, 60_000)).toBe(1);
    expect(loadFigure("time", counts, 60_000)).toBe(20);
    expect(loadFigure("time", counts, 0)).toBe(0);
    expect(LOAD_UNITS).toEqual({ time: "db ms/s", calls: "calls/s", writes: "writes/s" });
  });
});
