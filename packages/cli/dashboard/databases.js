// The map: a column per database (its labels, health, connections, outbox, load and a Drain
// button when actions are on) holding the cells of its shards, and a column of the shards whose
// owner did not answer. Columns and cells are kept across updates; only what changed is redrawn.
import { askDrain } from "./actions.js";
import { drawCharts } from "./charts.js";
import { byId, forget, h, place, setChildren, whenChanged } from "./dom.js";
import { count, duration, num, percent, when } from "./format.js";
import { drawCell, keepCells } from "./shards.js";

/**
 * @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot
 * @typedef {import("../src/dashboard/types.ts").DashboardDatabase} Database
 * @typedef {import("../src/dashboard/types.ts").DashboardShard} Shard
 */

/**
 * A database's column: its head, its chart's place and its shards' cells.
 * @typedef {import("./charts.js").ChartPlace & ColumnParts} Column
 * @typedef {object} ColumnParts
 * @property {HTMLElement} root
 * @property {HTMLElement} head
 * @property {HTMLElement} cells
 * @property {HTMLButtonElement | null} drain
 * @property {Database | null} db
 */

/** @type {Map<string, Column>} by database name */
export const columns = new Map();
/** @type {Column | null} */
let unknownColumn = null;

/** @param {string} name */
function makeColumn(name) {
  const root = h("section", {
    class: "db",
    "data-testid": "database",
    "data-name": name,
    "data-state": "up",
  });
  const head = h("div", { class: "db-head" });
  const chartBox = h("div", { class: "chart" });
  const readout = h("div", { class: "readout muted", text: " " });
  const cellBox = h("div", { class: "cells", role: "group", "aria-label": `shards on ${name}` });
  root.append(head, chartBox, readout, cellBox);
  /** @type {Column} */
  const column = { root, head, cells: cellBox, chartBox, readout, drain: null, chart: null, db: null };
  return column;
}

/** @returns {Column} */
function makeUnknownColumn() {
  const root = h(
    "section",
    { class: "db unknown-owner", "data-testid": "unknown-owner" },
    h("div", { class: "db-head" }, h("h3", { class: "db-name", text: "unknown owner" })),
    h("p", {
      class: "muted small",
      text: "Shards whose owner did not answer: where they live is not known now.",
    }),
  );
  const cellBox = h("div", { class: "cells", role: "group", "aria-label": "shards of unknown owner" });
  root.append(cellBox);
  return {
    root,
    head: /** @type {HTMLElement} */ (root.firstElementChild),
    cells: cellBox,
    chartBox: cellBox,
    readout: cellBox,
    drain: null,
    chart: null,
    db: null,
  };
}

/** @param {Snapshot} snap */
export function drawMap(snap) {
  const names = new Set(snap.databases.map((d) => d.name));
  for (const [name, column] of columns) {
    if (names.has(name)) continue;
    column.chart?.destroy();
    column.resize?.disconnect();
    forget(`head:${name}`);
    columns.delete(name);
  }
  /** @type {Map<string, Shard[]>} */
  const byDatabase = new Map();
  /** @type {Shard[]} */
  const unplaced = [];
  for (const shard of snap.shards) {
    if (shard.database !== null && names.has(shard.database)) {
      const list = byDatabase.get(shard.database) ?? [];
      list.push(shard);
      byDatabase.set(shard.database, list);
    } else unplaced.push(shard);
  }
  drawColumns(snap, unplaced.length > 0);

  const seen = new Set();
  /** @param {Shard} shard */
  const cell = (shard) => {
    seen.add(shard.key);
    return drawCell(shard);
  };
  for (const db of snap.databases) {
    place(/** @type {Column} */ (columns.get(db.name)).cells, (byDatabase.get(db.name) ?? []).map(cell));
  }
  if (unknownColumn) place(unknownColumn.cells, unplaced.map(cell));
  keepCells(seen);

  drawCharts(snap, columns);
}

/**
 * A column per database in the snapshot's order (made the first time), then the unknown owner's
 * when some shard's owner did not answer.
 * @param {Snapshot} snap @param {boolean} unplaced
 */
function drawColumns(snap, unplaced) {
  /** @type {Element[]} */
  const order = [];
  for (const db of snap.databases) {
    let column = columns.get(db.name);
    if (!column) {
      column = makeColumn(db.name);
      forget(`head:${db.name}`);
      columns.set(db.name, column);
    }
    column.db = db;
    drawColumnHead(column, db, snap);
    order.push(column.root);
  }
  if (unplaced) {
    unknownColumn ??= makeUnknownColumn();
    order.push(unknownColumn.root);
  }
  place(byId("columns"), order);
}

/** @param {Column} column @param {Database} db @param {Snapshot} snap */
function drawColumnHead(column, db, snap) {
  column.root.dataset.state = db.up ? "up" : "down";
  const { labels, up, error, latencyMs, answeredAt, connections, pool, outbox, load, share } = db;
  const shown = [labels, up, error, latencyMs, answeredAt, connections, pool, outbox, load, share];
  whenChanged(`head:${db.name}`, [...shown, snap.unit, db.shards.length], () => {
    const chips = Object.entries(db.labels).map(([k, v]) => h("span", { class: "chip", text: `${k}=${v}` }));
    setChildren(
      column.head,
      h("h3", { class: "db-name", title: db.name, text: db.name }),
      chips.length ? h("div", { class: "chips" }, ...chips) : null,
      h(
        "div",
        { class: "db-status" },
        h("span", { class: `badge ${db.up ? "up" : "down"}`, text: db.up ? "up" : "down" }),
        h("span", { "data-testid": "db-latency", class: "latency", text: latencyText(db) }),
      ),
      db.up
        ? null
        : h("p", { "data-testid": "db-error", class: "db-error", text: `down: ${db.error ?? "no answer"}` }),
      databaseFigures(db, snap.unit),
    );
  });
  keepDrainButton(column, db, snap.actions);
}

/** How fast a database answered, or when it last did. @param {Database} db */
function latencyText(db) {
  if (db.up) return db.latencyMs === null ? "—" : `${num(db.latencyMs)} ms`;
  if (!db.answeredAt) return "never answered";
  return `last answered ${when(db.answeredAt)}${db.latencyMs === null ? "" : ` in ${num(db.latencyMs)} ms`}`;
}

/** A database's connections, outbox, load and shards. @param {Database} db @param {string} unit */
function databaseFigures(db, unit) {
  const c = db.connections;
  const busy = c ? c.server / Math.max(1, c.max) : 0;
  const o = db.outbox;
  const figures = h(
    "dl",
    { class: "figures" },
    h("dt", { text: "connections" }),
    h(
      "dd",
      {
        class: busy >= 0.9 ? "bad" : busy >= 0.75 ? "warn" : null,
        title:
          "this database / its whole server of what the server accepts; of this database's, running a statement and idle in an open transaction",
        "data-testid": "connections",
      },
      c ? `${count(c.total)} / ${count(c.server)} of ${count(c.max)}` : "—",
      c
        ? h("span", {
            class: c.idleInTransaction > 0 ? "warn" : "muted",
            text: ` · ${count(c.active)} active, ${count(c.idleInTransaction)} idle in transaction`,
          })
        : null,
      db.pool !== null ? h("span", { class: "muted", text: ` · pool ${db.pool}` }) : null,
    ),
    h("dt", { text: "outbox" }),
    h(
      "dd",
      null,
      `${count(o.pending)} pending`,
      o.oldestPendingMs !== null && o.pending ? `, oldest ${duration(o.oldestPendingMs)}` : "",
      ", ",
      h("span", { class: o.dead ? "bad" : null, text: `${count(o.dead)} dead` }),
    ),
    h("dt", { text: "load" }),
    h(
      "dd",
      null,
      h("span", { class: "share-bar" }, h("span", { class: "share-fill", "data-share": db.share })),
      `${percent(db.share)} · ${num(db.load)} ${unit}`,
    ),
    h("dt", { text: "shards" }),
    h("dd", { text: String(db.shards.length) }),
  );
  const fill = /** @type {HTMLElement} */ (figures.querySelector(".share-fill"));
  fill.style.width = `${Math.round(Math.min(1, Math.max(0, db.share)) * 100)}%`;
  return figures;
}

/**
 * The Drain button, last in the column's head while actions are on. It is kept (not redrawn) so a
 * pending click keeps its state.
 * @param {Column} column @param {Database} db @param {boolean} actions
 */
function keepDrainButton(column, db, actions) {
  if (actions) {
    if (!column.drain) {
      const button = /** @type {HTMLButtonElement} */ (
        h("button", {
          type: "button",
          class: "drain",
          "data-action": "drain",
          "data-database": db.name,
          text: "Drain…",
        })
      );
      button.addEventListener("click", () => askDrain(db.name, button));
      column.drain = button;
    }
    if (column.drain.parentElement !== column.head) column.head.append(column.drain);
  } else if (column.drain) {
    column.drain.remove();
    column.drain = null;
  }
  if (
    column.drain &&
    column.drain.parentElement === column.head &&
    column.head.lastElementChild !== column.drain
  ) {
    column.head.append(column.drain);
  }
}
