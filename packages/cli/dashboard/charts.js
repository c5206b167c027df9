// Each database's load over the window as a small uPlot chart (uPlot is loaded by its own script
// before the page's modules run). Every chart shares one scale: the hottest database's top.
import { clock, num, shortClock } from "./format.js";
import { page } from "./state.js";

/** @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot */

/**
 * Where a database's chart goes (its column on the map), and the chart once made.
 * @typedef {object} ChartPlace
 * @property {HTMLElement} chartBox
 * @property {HTMLElement} readout the figure under the cursor
 * @property {any} chart
 * @property {ResizeObserver | null} [resize]
 */

/** The top of every chart's load scale: all databases share one. */
let chartTop = 1;

/**
 * Draws each database's chart in its column, making the chart the first time.
 * @param {Snapshot} snap @param {Map<string, ChartPlace>} columns by database name
 */
export function drawCharts(snap, columns) {
  const uPlot = /** @type {any} */ (globalThis).uPlot;
  let top = 0;
  for (const db of snap.databases) for (const v of db.series.v) if (Number.isFinite(v) && v > top) top = v;
  chartTop = top > 0 ? top * 1.1 : 1;
  for (const db of snap.databases) {
    const column = /** @type {ChartPlace} */ (columns.get(db.name));
    const data = [db.series.t, db.series.v];
    if (!uPlot) {
      column.chartBox.textContent = "(chart unavailable: uPlot did not load)";
      continue;
    }
    column.chart ??= makeChart(uPlot, column);
    column.chart.setData(data);
  }
}

/** @param {any} uPlot @param {ChartPlace} column */
function makeChart(uPlot, column) {
  const box = column.chartBox;
  const width = Math.max(120, box.clientWidth || 200);
  const axis = {
    stroke: "#5b6570",
    font: "10px system-ui, sans-serif",
    grid: { stroke: "#e6e9ed", width: 1 },
    ticks: { show: false },
  };
  const chart = new uPlot(
    {
      width,
      height: 86,
      ms: 1,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 5 } },
      scales: { x: { time: true }, y: { range: () => [0, chartTop] } },
      axes: [
        {
          ...axis,
          size: 20,
          space: 60,
          // Seconds only when the ticks are less than a minute apart (two ticks never read the same).
          values: (/** @type {any} */ _u, /** @type {number[]} */ ts) => {
            const format = ts.length > 1 && ts[1] - ts[0] < 60_000 ? clock : shortClock;
            return ts.map((t) => format.format(new Date(t)));
          },
        },
        {
          ...axis,
          size: 34,
          space: 24,
          values: (/** @type {any} */ _u, /** @type {number[]} */ vals) => vals.map((v) => num(v)),
        },
      ],
      series: [
        {},
        { stroke: "#c2410c", width: 1.5, fill: "rgba(234, 88, 12, 0.12)", points: { show: false } },
      ],
      hooks: {
        setCursor: [
          (/** @type {any} */ u) => {
            const i = u.cursor.idx;
            const t = i === null || i === undefined ? undefined : u.data[0][i];
            column.readout.textContent =
              t === undefined
                ? " "
                : `${clock.format(new Date(t))}: ${num(u.data[1][i])} ${page.snapshot?.unit ?? ""}`;
          },
        ],
      },
    },
    [[], []],
    box,
  );
  column.resize = new ResizeObserver(() => {
    const w = Math.max(120, box.clientWidth);
    if (w !== chart.width) chart.setSize({ width: w, height: 86 });
  });
  column.resize.observe(box);
  return chart;
}
