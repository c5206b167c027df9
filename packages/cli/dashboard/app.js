// The page of `shardkit dashboard`: plain browser JavaScript, no build step. It receives a
// DashboardSnapshot (see ../src/dashboard/types.ts) on each update and redraws in place.
// Every name, key and error in a snapshot is untrusted text: the page only ever sets it with
// textContent or attributes, never as HTML.

/**
 * @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot
 * @typedef {import("../src/dashboard/types.ts").DashboardDatabase} Database
 * @typedef {import("../src/dashboard/types.ts").DashboardShard} Shard
 * @typedef {import("../src/dashboard/types.ts").DashboardMove} Move
 * @typedef {import("../src/dashboard/types.ts").DashboardMoveEnded} MoveEnded
 * @typedef {import("../src/dashboard/types.ts").DashboardPlan} Plan
 * @typedef {import("../src/dashboard/types.ts").DashboardRun} Run
 */

/** Without a snapshot for this long, the page asks `/api/state` instead. */
const FALLBACK_AFTER_MS = 15_000;
const NOT_AUTHORISED = "not authorised: open the address the dashboard printed (with its token)";
const SVG = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------------------------------------
// Small DOM helpers

/**
 * An element with attributes (null/false ones left out) and children (strings become text).
 * @param {string} tag
 * @param {Record<string, unknown> | null} [attrs]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") e.textContent = String(value);
      else if (name === "class") e.className = String(value);
      else e.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

/**
 * Replaces `parent`'s children, leaving out the absent ones.
 * @param {Element} parent
 * @param {...(Node | string | null | undefined | false)} children
 */
function setChildren(parent, ...children) {
  parent.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
}

/**
 * An SVG element with attributes.
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
function s(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) e.setAttribute(name, String(value));
  return e;
}

/** @param {string} id */
function byId(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`the page lacks #${id}`);
  return e;
}

/**
 * Makes `parent`'s element children exactly `nodes`, in order, moving only what is out of place
 * (so hover, focus and selection survive an update).
 * @param {Element} parent
 * @param {Element[]} nodes
 */
function place(parent, nodes) {
  nodes.forEach((node, i) => {
    const at = parent.children[i];
    if (at !== node) parent.insertBefore(node, at ?? null);
  });
  while (parent.children.length > nodes.length) parent.lastElementChild?.remove();
}

/**
 * Runs `draw` only when `value` differs from the last one drawn under `name`.
 * @type {Map<string, string>}
 */
const drawn = new Map();
/** @param {string} name @param {unknown} value @param {() => void} draw */
function whenChanged(name, value, draw) {
  const signature = JSON.stringify(value);
  if (drawn.get(name) === signature) return;
  drawn.set(name, signature);
  draw();
}

// ---------------------------------------------------------------------------------------------
// Formatting

/** @param {number | null | undefined} n */
function num(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "—";
  const a = Math.abs(n);
  if (a === 0) return "0";
  if (a >= 100) return Math.round(n).toLocaleString("en");
  if (a >= 10) return n.toFixed(1);
  if (a >= 0.01) return n.toFixed(2);
  return n.toPrecision(2);
}

/** @param {number | null | undefined} n */
function count(n) {
  return n === null || n === undefined ? "—" : Math.round(n).toLocaleString("en");
}

/** @param {number | null | undefined} b */
function bytes(b) {
  if (b === null || b === undefined || !Number.isFinite(b)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

/** @param {number | null | undefined} ms */
function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** @param {number} ms */
function windowText(ms) {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000) return `${+(ms / 60_000).toFixed(1)} min`;
  return `${+(ms / 1000).toFixed(1)} s`;
}

const clock = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});
const shortClock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });
const dateClock = new Intl.DateTimeFormat(undefined, {
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});

/** A time of day, with the date when it is not today. @param {string | null | undefined} iso */
function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toDateString() === new Date().toDateString() ? clock.format(d) : dateClock.format(d);
}

/** @param {number} ms */
function ago(ms) {
  if (ms < 1500) return "just now";
  return `${duration(Math.round(ms / 1000) * 1000)} ago`;
}

/** @param {number} share 0..1 */
function percent(share) {
  if (!Number.isFinite(share)) return "—";
  const p = share * 100;
  return `${p > 0 && p < 1 ? p.toFixed(1) : Math.round(p)}%`;
}

/** @param {string} from @param {string} to */
function arrow(from, to) {
  return `${from} → ${to}`;
}

/**
 * A perceptual ramp from pale (0, cool) to red (1, hot): lightness falls evenly in OKLCH.
 * @param {number} heat
 */
function heatColours(heat) {
  const t = Math.min(1, Math.max(0, Number.isFinite(heat) ? heat : 0));
  const l = 0.97 - 0.42 * t;
  const c = 0.025 + 0.18 * t;
  const hue = 95 - 68 * t;
  return {
    bg: `oklch(${l.toFixed(3)} ${c.toFixed(3)} ${hue.toFixed(1)})`,
    ink: l < 0.7 ? "#fff" : "#1b1f24",
  };
}

// ---------------------------------------------------------------------------------------------
// Page state

const page = {
  /** @type {Snapshot | null} */
  snapshot: null,
  /** @type {string | null} the selected shard's key */
  selected: null,
  /** When the last snapshot arrived (page clock). */
  receivedAt: Date.now(),
  /** @type {"live" | "disconnected"} */
  connection: "disconnected",
  unauthorised: false,
  fetching: false,
  lastFetchAt: 0,
  /** @type {EventSource | null} */
  events: null,
  retryMs: 1000,
  /** The database each shard was last seen on (for shards whose owner no longer answers). */
  lastSeenOn: /** @type {Map<string, string>} */ (new Map()),
};

const selectedFromHash = /^#shard=(.+)$/.exec(location.hash);
if (selectedFromHash) page.selected = decodeURIComponent(selectedFromHash[1]);

// ---------------------------------------------------------------------------------------------
// Connection: server-sent events, with /api/state as a fallback

function connect() {
  const events = new EventSource("/api/events");
  page.events = events;
  events.addEventListener("snapshot", (ev) => {
    /** @type {Snapshot} */
    let snapshot;
    try {
      snapshot = JSON.parse(/** @type {MessageEvent} */ (ev).data);
    } catch {
      console.warn("shardkit: a snapshot that is not JSON was ignored");
      return;
    }
    page.retryMs = 1000;
    page.unauthorised = false;
    setConnection("live");
    receive(snapshot);
  });
  events.addEventListener("open", () => setConnection("live"));
  events.addEventListener("error", () => {
    setConnection("disconnected");
    // The browser reconnects by itself unless the stream was refused outright (a 401, a 5xx):
    // then the page opens a new one, waiting longer each time.
    if (events.readyState === EventSource.CLOSED && page.events === events) {
      page.events = null;
      // Refused outright: `/api/state` says whether it was for want of the token.
      if (!page.fetching) void fetchState();
      setTimeout(connect, page.retryMs);
      page.retryMs = Math.min(30_000, page.retryMs * 2);
    }
  });
}

async function fetchState() {
  page.fetching = true;
  page.lastFetchAt = Date.now();
  try {
    const res = await fetch("/api/state", {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    if (res.status === 401) {
      page.unauthorised = true;
      drawConnection();
      return;
    }
    if (!res.ok) return;
    page.unauthorised = false;
    receive(await res.json());
  } catch {
    // Unreachable: the connection line already says so; the next attempt comes on its own.
  } finally {
    page.fetching = false;
    drawConnection();
  }
}

/** @param {"live" | "disconnected"} state */
function setConnection(state) {
  page.connection = state;
  drawConnection();
}

function drawConnection() {
  document.body.dataset.connection = page.connection;
  const line = byId("connection");
  line.dataset.state = page.unauthorised ? "unauthorised" : page.connection;
  line.textContent = page.unauthorised
    ? NOT_AUTHORISED
    : page.connection === "live"
      ? "live"
      : page.snapshot
        ? "disconnected, retrying (showing the last data)"
        : "disconnected, retrying";
  byId("auth").hidden = !page.unauthorised;
}

function tick() {
  const quiet = Date.now() - page.receivedAt;
  if (page.snapshot) {
    byId("at").textContent = `${when(page.snapshot.at)} (${ago(quiet)})`;
    byId("at").classList.toggle("stale", quiet > FALLBACK_AFTER_MS);
  }
  if (quiet > FALLBACK_AFTER_MS && !page.fetching && Date.now() - page.lastFetchAt > FALLBACK_AFTER_MS) {
    void fetchState();
  }
}

/** @param {Snapshot} snapshot */
function receive(snapshot) {
  if (!snapshot || typeof snapshot !== "object" || !Array.isArray(snapshot.databases)) return;
  page.receivedAt = Date.now();
  const previous = page.snapshot;
  // The same snapshot again (a fallback answer the stream already gave) is not drawn twice.
  if (previous && previous.seq === snapshot.seq && previous.at === snapshot.at) return;
  page.snapshot = snapshot;
  render(snapshot);
}

// ---------------------------------------------------------------------------------------------
// Drawing

/** @param {Snapshot} snap */
function render(snap) {
  document.body.dataset.seq = String(snap.seq);
  for (const shard of snap.shards) if (shard.database) page.lastSeenOn.set(shard.key, shard.database);
  // One part that cannot draw (a field it did not expect) leaves the others up to date.
  for (const draw of [drawHeader, drawProblems, drawMap, drawDetail, drawMoves, drawHistory, drawPlan]) {
    try {
      draw(snap);
    } catch (error) {
      console.error(`shardkit: ${draw.name} failed`, error);
    }
  }
  drawConnection();
}

/** @param {Snapshot} snap */
function drawHeader(snap) {
  byId("config").textContent = snap.config;
  byId("at").textContent = `${when(snap.at)} (just now)`;
  byId("at").classList.remove("stale");
  const what =
    snap.by === "time"
      ? "time in the database per second"
      : snap.by === "calls"
        ? "calls per second"
        : "writes per second";
  byId("window").textContent = `load: ${what} over the last ${windowText(snap.windowMs)} (${snap.unit})`;
}

/** @param {Snapshot} snap */
function drawProblems(snap) {
  const errors = snap.problems.filter((p) => p.level === "error").length;
  document.title = `${errors ? `(${errors} ${errors === 1 ? "error" : "errors"}) ` : ""}shardkit dashboard`;
  whenChanged("problems", snap.problems, () => {
    const list = byId("problem-list");
    byId("problems").hidden = snap.problems.length === 0;
    list.replaceChildren(
      ...snap.problems.map((p) => {
        const item = h(
          "li",
          { "data-testid": "problem", "data-kind": p.kind, "data-level": p.level, class: p.level },
          h("span", { class: "level", text: p.level === "error" ? "error" : "warning" }),
          h("span", { class: "problem-text", text: p.text }),
        );
        if (p.shard) {
          const key = p.shard;
          const show = h("button", { type: "button", class: "link", text: `show ${key}` });
          show.addEventListener("click", () => select(key));
          item.append(show);
        } else if (p.database) {
          const name = p.database;
          const show = h("button", { type: "button", class: "link", text: "show" });
          show.addEventListener("click", () => columns.get(name)?.root.scrollIntoView({ block: "nearest" }));
          item.append(show);
        }
        return item;
      }),
    );
  });
}

// --- the map ----------------------------------------------------------------------------------

/**
 * @typedef {object} Column
 * @property {HTMLElement} root
 * @property {HTMLElement} head
 * @property {HTMLElement} cells
 * @property {HTMLElement} chartBox
 * @property {HTMLElement} readout
 * @property {HTMLButtonElement | null} drain
 * @property {any} chart
 * @property {ResizeObserver | null} [resize]
 * @property {Database | null} db
 */

/** @type {Map<string, Column>} by database name */
const columns = new Map();
/** @type {Column | null} */
let unknownColumn = null;
/** @type {Map<string, HTMLButtonElement>} by shard key */
const cells = new Map();
/** The top of every chart's load scale: all databases share one. */
let chartTop = 1;

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
function drawMap(snap) {
  const names = new Set(snap.databases.map((d) => d.name));
  for (const [name, column] of columns) {
    if (names.has(name)) continue;
    column.chart?.destroy();
    column.resize?.disconnect();
    drawn.delete(`head:${name}`);
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

  /** @type {Element[]} */
  const order = [];
  for (const db of snap.databases) {
    let column = columns.get(db.name);
    if (!column) {
      column = makeColumn(db.name);
      drawn.delete(`head:${db.name}`);
      columns.set(db.name, column);
    }
    column.db = db;
    drawColumnHead(column, db, snap);
    order.push(column.root);
  }
  if (unplaced.length > 0) {
    unknownColumn ??= makeUnknownColumn();
    order.push(unknownColumn.root);
  }
  place(byId("columns"), order);

  const seen = new Set();
  for (const db of snap.databases) {
    const column = /** @type {Column} */ (columns.get(db.name));
    place(
      column.cells,
      (byDatabase.get(db.name) ?? []).map((shard) => {
        seen.add(shard.key);
        return drawCell(shard);
      }),
    );
  }
  if (unknownColumn) {
    place(
      unknownColumn.cells,
      unplaced.map((shard) => {
        seen.add(shard.key);
        return drawCell(shard);
      }),
    );
  }
  for (const key of cells.keys()) if (!seen.has(key)) cells.delete(key);

  drawCharts(snap);
}

/** @param {Column} column @param {Database} db @param {Snapshot} snap */
function drawColumnHead(column, db, snap) {
  column.root.dataset.state = db.up ? "up" : "down";
  whenChanged(
    `head:${db.name}`,
    [
      db.labels,
      db.up,
      db.error,
      db.latencyMs,
      db.answeredAt,
      db.connections,
      db.pool,
      db.outbox,
      db.load,
      db.share,
      snap.unit,
      db.shards.length,
    ],
    () => {
      const chips = Object.entries(db.labels).map(([k, v]) =>
        h("span", { class: "chip", text: `${k}=${v}` }),
      );
      const latency = db.up
        ? db.latencyMs === null
          ? "—"
          : `${num(db.latencyMs)} ms`
        : db.answeredAt
          ? `last answered ${when(db.answeredAt)}${db.latencyMs === null ? "" : ` in ${num(db.latencyMs)} ms`}`
          : "never answered";
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
            title: "this database / its whole server of what the server accepts",
          },
          c ? `${count(c.database)} / ${count(c.server)} of ${count(c.max)}` : "—",
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
          `${percent(db.share)} · ${num(db.load)} ${snap.unit}`,
        ),
        h("dt", { text: "shards" }),
        h("dd", { text: String(db.shards.length) }),
      );
      const fill = /** @type {HTMLElement} */ (figures.querySelector(".share-fill"));
      fill.style.width = `${Math.round(Math.min(1, Math.max(0, db.share)) * 100)}%`;
      setChildren(
        column.head,
        h("h3", { class: "db-name", title: db.name, text: db.name }),
        chips.length ? h("div", { class: "chips" }, ...chips) : null,
        h(
          "div",
          { class: "db-status" },
          h("span", { class: `badge ${db.up ? "up" : "down"}`, text: db.up ? "up" : "down" }),
          h("span", { "data-testid": "db-latency", class: "latency", text: latency }),
        ),
        db.up
          ? null
          : h("p", {
              "data-testid": "db-error",
              class: "db-error",
              text: `down: ${db.error ?? "no answer"}`,
            }),
        figures,
      );
    },
  );
  // The drain button is kept (not redrawn) so a pending click keeps its state.
  if (snap.actions) {
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

/** @param {Shard} shard */
function drawCell(shard) {
  let cell = cells.get(shard.key);
  if (!cell) {
    const key = shard.key;
    cell = /** @type {HTMLButtonElement} */ (
      h("button", { type: "button", class: "cell", "data-testid": "shard" })
    );
    cell.addEventListener("click", () => select(page.selected === key ? null : key));
    cells.set(key, cell);
  }
  const d = cell.dataset;
  d.key = shard.key;
  d.state = shard.state;
  d.epoch = shard.epoch === null ? "" : String(shard.epoch);
  d.database = shard.database ?? "";
  d.heat = String(shard.heat);
  d.load = String(shard.load);
  const { bg, ink } = heatColours(shard.heat);
  cell.style.setProperty("--heat", bg);
  cell.style.setProperty("--ink", ink);
  cell.classList.toggle("violates", Boolean(shard.violates));
  const selected = page.selected === shard.key;
  cell.classList.toggle("selected", selected);
  cell.setAttribute("aria-pressed", String(selected));
  if (cell.textContent !== shard.key) cell.textContent = shard.key;
  cell.classList.toggle("long", shard.key.length > 5);
  cell.title = shardSummary(shard);
  return cell;
}

/** @param {Shard} shard */
function shardSummary(shard) {
  const unit = page.snapshot?.unit ?? "";
  const lines = [
    `${shard.key}: ${shard.state}${shard.epoch !== null ? `, epoch ${shard.epoch}` : ""}`,
    `on ${shard.database ?? `unknown${page.lastSeenOn.has(shard.key) ? ` (last seen on ${page.lastSeenOn.get(shard.key)})` : ""}`}`,
    `load ${num(shard.load)} ${unit} (heat ${num(shard.heat)})`,
    `calls ${count(shard.calls)}, writes ${count(shard.writes)}, p99 ${shard.p99Ms === null ? "—" : `${num(shard.p99Ms)} ms`}`,
  ];
  if (shard.movingTo) lines.push(`moving to ${shard.movingTo}`);
  if (shard.violates) lines.push(`breaks: ${shard.violates}`);
  return lines.join("\n");
}

/** @param {string | null} key */
function select(key) {
  page.selected = key;
  history.replaceState(
    null,
    "",
    key ? `#shard=${encodeURIComponent(key)}` : location.pathname + location.search,
  );
  for (const [k, cell] of cells) {
    cell.classList.toggle("selected", k === key);
    cell.setAttribute("aria-pressed", String(k === key));
  }
  if (page.snapshot) drawDetail(page.snapshot);
  if (key) cells.get(key)?.scrollIntoView({ block: "nearest", inline: "nearest" });
}

// --- charts -----------------------------------------------------------------------------------

/** @param {Snapshot} snap */
function drawCharts(snap) {
  const uPlot = /** @type {any} */ (globalThis).uPlot;
  let top = 0;
  for (const db of snap.databases) for (const v of db.series.v) if (Number.isFinite(v) && v > top) top = v;
  chartTop = top > 0 ? top * 1.1 : 1;
  for (const db of snap.databases) {
    const column = /** @type {Column} */ (columns.get(db.name));
    const data = [db.series.t, db.series.v];
    if (!uPlot) {
      column.chartBox.textContent = "(chart unavailable: uPlot did not load)";
      continue;
    }
    column.chart ??= makeChart(uPlot, column);
    column.chart.setData(data);
  }
}

/** @param {any} uPlot @param {Column} column */
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

// --- detail -----------------------------------------------------------------------------------

/** @param {Snapshot} snap */
function drawDetail(snap) {
  const key = page.selected;
  const shard = key ? snap.shards.find((x) => x.key === key) : undefined;
  whenChanged("detail", [key, shard ?? null, snap.unit, key ? page.lastSeenOn.get(key) : null], () => {
    const panel = byId("detail");
    if (!key) {
      panel.replaceChildren(
        h("h2", { text: "Shard" }),
        h("p", { class: "muted", text: "Click a shard to see its figures and its heaviest keys." }),
      );
      return;
    }
    const close = h("button", {
      type: "button",
      class: "link close",
      "aria-label": "clear selection",
      text: "×",
    });
    close.addEventListener("click", () => select(null));
    if (!shard) {
      panel.replaceChildren(
        h("h2", null, `Shard ${key}`, close),
        h("p", { class: "muted", text: "This shard is not in the latest snapshot." }),
      );
      return;
    }
    const rows = [
      [
        "database",
        shard.database ??
          `unknown${page.lastSeenOn.has(key) ? ` (last seen on ${page.lastSeenOn.get(key)})` : ""}`,
      ],
      ["state", shard.state],
      ["epoch", shard.epoch === null ? "—" : String(shard.epoch)],
      ["load", `${num(shard.load)} ${snap.unit}`],
      ["heat", `${num(shard.heat)} of the hottest`],
      ["calls", count(shard.calls)],
      ["writes", count(shard.writes)],
      ["p99", shard.p99Ms === null ? "—" : `${num(shard.p99Ms)} ms`],
      ["moving to", shard.movingTo ?? "—"],
      ["breaks", shard.violates ?? "no placement rule"],
    ];
    const top = shard.top.length
      ? h(
          "ol",
          { class: "top-keys" },
          ...shard.top.map((t) => {
            const fill = h("span", { class: "bar-fill" });
            fill.style.width = `${Math.round(Math.min(1, Math.max(0, t.share)) * 100)}%`;
            return h(
              "li",
              { "data-testid": "top-key", "data-key": t.key },
              h("code", { class: "top-key", title: t.key, text: t.key }),
              h("span", { class: "bar" }, fill),
              h("span", { class: "num", text: percent(t.share) }),
            );
          }),
        )
      : h("p", { class: "muted", text: "No calls recorded in the window." });
    panel.replaceChildren(
      h("h2", null, `Shard ${shard.key}`, close),
      h(
        "dl",
        { class: "figures detail-figures" },
        ...rows.flatMap(([k, v]) => [
          h("dt", { text: k }),
          h("dd", { class: k === "breaks" && shard.violates ? "warn" : null, text: v }),
        ]),
      ),
      h("h3", { text: "Heaviest keys (share of its calls)" }),
      top,
      h("p", { class: "muted small", text: "Keys are shown hashed unless the app records plain keys." }),
    );
  });
}

// --- moves and history ------------------------------------------------------------------------

/** @type {Map<string, HTMLTableSectionElement>} by shard */
const moveRows = new Map();

/** @param {Snapshot} snap */
function drawMoves(snap) {
  const table = byId("moves-table");
  byId("moves-empty").hidden = snap.moves.length > 0;
  table.hidden = snap.moves.length === 0;
  /** @type {Element[]} */
  const bodies = [table.querySelector("thead") ?? h("thead")];
  const seen = new Set();
  for (const m of snap.moves) {
    seen.add(m.shard);
    let body = moveRows.get(m.shard);
    if (!body) {
      body = /** @type {HTMLTableSectionElement} */ (h("tbody", { class: "move" }));
      moveRows.set(m.shard, body);
    }
    const b = body;
    whenChanged(`move:${m.shard}`, m, () => drawMove(b, m));
    bodies.push(body);
  }
  for (const key of moveRows.keys()) {
    if (!seen.has(key)) {
      moveRows.delete(key);
      drawn.delete(`move:${key}`);
    }
  }
  place(table, bodies);
}

/** @param {HTMLTableSectionElement} body @param {Move} m */
function drawMove(body, m) {
  const progress = /** @type {HTMLProgressElement} */ (h("progress", { max: Math.max(1, m.steps) }));
  progress.value = Math.min(m.stepIndex, Math.max(1, m.steps));
  progress.textContent = `${m.stepIndex} of ${m.steps}`;
  const rows =
    m.rows === null
      ? "—"
      : m.rowsTotal === null
        ? count(m.rows)
        : `${count(m.rows)} of ${count(m.rowsTotal)}`;
  const row = h(
    "tr",
    {
      "data-testid": "move",
      "data-shard": m.shard,
      "data-step": m.step,
      "data-live": String(m.live),
      class: m.live ? null : "stopped",
    },
    h("td", null, h("code", { text: m.shard })),
    h("td", { text: arrow(m.from, m.to) }),
    h("td", { text: m.mode ?? "—" }),
    h("td", { text: `${m.step} (${m.stepIndex}/${m.steps})` }),
    h("td", null, progress),
    h("td", { class: "num", text: rows }),
    h("td", { class: "num", text: bytes(m.lagBytes) }),
    h("td", { class: "holder", title: m.holder, text: m.holder }),
    h("td", { text: when(m.startedAt) }),
  );
  const note = m.live
    ? null
    : h(
        "tr",
        { class: "stopped-note" },
        h(
          "td",
          { colspan: 9 },
          "stopped — the next ",
          h("code", { text: "shardkit move" }),
          " of this shard finishes or undoes it",
        ),
      );
  body.replaceChildren(row, ...(note ? [note] : []));
}

/** @param {Snapshot} snap */
function drawHistory(snap) {
  whenChanged("history", snap.history, () => {
    byId("history-empty").hidden = snap.history.length > 0;
    byId("history-table").hidden = snap.history.length === 0;
    byId("history-body").replaceChildren(
      ...snap.history.map((m) =>
        h(
          "tr",
          { "data-testid": "move-ended", "data-shard": m.shard, "data-outcome": m.outcome },
          h("td", null, h("code", { text: m.shard })),
          h("td", { text: arrow(m.from, m.to) }),
          h("td", null, h("span", { class: `outcome ${m.outcome}`, text: m.outcome })),
          h("td", { text: m.mode ?? "—" }),
          h("td", { class: "num", text: m.freezeMs === null ? "—" : `${count(m.freezeMs)} ms` }),
          h("td", { class: "num", text: duration(m.durationMs) }),
          h("td", { class: "num", text: count(m.rows) }),
          h("td", { text: when(m.endedAt) }),
          h("td", { class: "error-text", text: m.error ?? "" }),
        ),
      ),
    );
  });
}

// --- balancer ---------------------------------------------------------------------------------

/** @param {string} name @param {string} label @param {string} [cls] */
function actionButton(name, label, cls) {
  const b = /** @type {HTMLButtonElement} */ (
    h("button", { type: "button", "data-action": name, class: cls ?? null, text: label })
  );
  return b;
}

const buttons = {
  plan: actionButton("plan", "Re-plan"),
  balance: actionButton("balance", "Run this plan…", "primary"),
  pause: actionButton("pause", "Pause…"),
  resume: actionButton("resume", "Resume…"),
};
buttons.plan.addEventListener("click", () => void post("plan", {}, buttons.plan));
buttons.balance.addEventListener("click", askBalance);
buttons.pause.addEventListener("click", askPause);
buttons.resume.addEventListener("click", askResume);

/** @param {Snapshot} snap */
function drawPlan(snap) {
  const plan = snap.plan;
  // A plan made before shards moved is not offered to run: a new one is on its way.
  const runnable = snap.actions && plan !== null && plan.moves.length > 0 && !plan.stale;
  place(byId("plan-buttons"), runnable ? [buttons.plan, buttons.balance] : [buttons.plan]);
  drawRun(snap);
  whenChanged("plan", [plan, snap.unit], () => {
    const body = byId("plan-body");
    if (!plan) {
      body.replaceChildren(
        h("p", { class: "muted", text: "No plan yet: Re-plan makes one (it only reads)." }),
      );
      return;
    }
    /** @type {(Node | null)[]} */
    const parts = [
      h(
        "p",
        { class: "plan-reason" },
        h("strong", { text: plan.reason }),
        h("span", {
          class: "muted",
          text: ` (made ${when(plan.at)}${plan.stoppedBy ? `; stopped by ${plan.stoppedBy}` : ""})`,
        }),
      ),
    ];
    if (plan.stale) parts.push(h("p", { class: "plan-stale warn", text: `Stale: ${plan.stale}` }));
    if (plan.problems.length) {
      parts.push(
        h("ul", { class: "plan-problems" }, ...plan.problems.map((p) => h("li", { class: "bad", text: p }))),
      );
    }
    if (plan.moves.length) {
      parts.push(
        h(
          "div",
          { class: "scroll" },
          h(
            "table",
            { class: "plan-moves" },
            h(
              "thead",
              null,
              h(
                "tr",
                null,
                h("th", { text: "shard" }),
                h("th", { text: "from → to" }),
                h("th", { text: "kind" }),
                h("th", { text: "reason" }),
                h("th", { class: "num", text: `load (${snap.unit})` }),
                h("th", { class: "num", text: "bytes" }),
              ),
            ),
            h(
              "tbody",
              null,
              ...plan.moves.map((m) =>
                h(
                  "tr",
                  { "data-testid": "plan-move", "data-shard": m.shard },
                  h("td", null, h("code", { text: m.shard })),
                  h("td", { text: arrow(m.from, m.to) }),
                  h("td", { text: m.kind }),
                  h("td", { text: m.reason }),
                  h("td", { class: "num", text: num(m.load) }),
                  h("td", { class: "num", text: bytes(m.bytes) }),
                ),
              ),
            ),
          ),
        ),
      );
    } else {
      parts.push(h("p", { class: "muted", text: "The plan moves nothing." }));
    }
    if (plan.databases.length) parts.push(drawBalance(plan));
    if (plan.hot.length) {
      parts.push(
        h("h3", { text: "Too hot to move" }),
        h(
          "ul",
          { class: "plain" },
          ...plan.hot.map((x) =>
            h(
              "li",
              null,
              h("code", { text: x.shard }),
              ` on ${x.database}: ${num(x.load)} ${snap.unit}, ${x.reason}`,
            ),
          ),
        ),
      );
    }
    if (plan.skipped.length) {
      parts.push(
        h("h3", { text: "Skipped" }),
        h(
          "ul",
          { class: "plain" },
          ...plan.skipped.map((x) => h("li", null, h("code", { text: x.shard }), `: ${x.reason}`)),
        ),
      );
    }
    setChildren(body, ...parts);
  });
}

/**
 * Each database's load over the mean, before and after the plan: two bars and a mean line.
 * @param {Plan} plan
 */
function drawBalance(plan) {
  const top =
    Math.max(1.5, ...plan.databases.flatMap((d) => [d.ratioBefore, d.ratioAfter]).filter(Number.isFinite)) *
    1.08;
  const W = 300;
  const mean = (1 / top) * W;
  const rows = plan.databases.map((d) => {
    const svg = s("svg", {
      viewBox: `0 0 ${W} 22`,
      preserveAspectRatio: "none",
      class: "balance-bars",
      role: "img",
    });
    svg.setAttribute(
      "aria-label",
      `${d.name}: ${num(d.ratioBefore)} of the mean before, ${num(d.ratioAfter)} after`,
    );
    const bar = (/** @type {number} */ ratio, /** @type {number} */ y, /** @type {string} */ cls) =>
      s("rect", { x: 0, y, height: 8, width: Math.max(0.5, (Math.max(0, ratio) / top) * W), class: cls });
    svg.append(
      bar(d.ratioBefore, 2, "before"),
      bar(d.ratioAfter, 12, "after"),
      s("line", { x1: mean, x2: mean, y1: 0, y2: 22, class: "mean" }),
    );
    return h(
      "div",
      { class: "balance-row", "data-database": d.name },
      h("span", { class: "balance-name", title: d.name, text: d.name }),
      svg,
      h("span", { class: "balance-figures", text: `×${num(d.ratioBefore)} → ×${num(d.ratioAfter)}` }),
    );
  });
  return h(
    "figure",
    { class: "balance" },
    h(
      "figcaption",
      null,
      "Load per capacity over the mean: ",
      h("span", { class: "key before" }),
      " before, ",
      h("span", { class: "key after" }),
      " after the plan; the dashed line is the mean.",
    ),
    ...rows,
  );
}

/** @param {Snapshot} snap */
function drawRun(snap) {
  const run = snap.run;
  const area = byId("run-area");
  if (!run) {
    area.replaceChildren();
    drawn.delete("run");
    return;
  }
  let box = area.querySelector("[data-testid=run]");
  if (!box) {
    box = h(
      "div",
      { class: "run", "data-testid": "run" },
      h("div", { class: "run-text" }),
      h("div", { class: "buttons" }),
    );
    area.replaceChildren(box);
  }
  const runBox = /** @type {HTMLElement} */ (box);
  runBox.dataset.state = run.state;
  whenChanged("run", run, () => {
    const progress = /** @type {HTMLProgressElement} */ (h("progress", { max: Math.max(1, run.total) }));
    progress.value = Math.min(run.done, Math.max(1, run.total));
    const what = run.kind === "drain" ? `Drain of ${run.database ?? "a database"}` : "Balance";
    setChildren(
      /** @type {HTMLElement} */ (runBox.firstElementChild),
      h(
        "p",
        null,
        h("strong", { text: `${what}: ${run.state}` }),
        ` — ${run.done} of ${run.total} moves done, started ${when(run.startedAt)} `,
        progress,
      ),
      run.current
        ? h(
            "p",
            null,
            "now: ",
            h("code", { text: run.current.shard }),
            ` ${arrow(run.current.from, run.current.to)}, step ${run.current.step}`,
          )
        : null,
      run.reason ? h("p", { class: run.state === "failed" ? "bad" : "muted", text: run.reason }) : null,
      run.left.length > 0 && (run.state === "paused" || run.state === "pausing")
        ? h(
            "p",
            { "data-testid": "run-left" },
            "left: ",
            ...run.left.map((m, i) =>
              h("span", null, i > 0 ? ", " : "", h("code", { text: m.shard }), ` ${arrow(m.from, m.to)}`),
            ),
          )
        : null,
    );
  });
  const ended = run.state === "done" || run.state === "failed";
  const wanted = snap.actions && !ended ? [buttons.pause, buttons.resume] : [];
  place(/** @type {Element} */ (runBox.lastElementChild), wanted);
  buttons.pause.disabled = run.state !== "running" || buttons.pause.dataset.busy === "1";
  buttons.resume.disabled = run.state === "running" || buttons.resume.dataset.busy === "1";
}

// ---------------------------------------------------------------------------------------------
// Actions: confirm on the page, then post

const dialog = /** @type {HTMLDialogElement} */ (byId("confirm-dialog"));

/**
 * Shows the confirmation dialog; resolves true on Confirm.
 * @param {string} title @param {string} text @param {string[]} [items]
 * @returns {Promise<boolean>}
 */
function confirmOnPage(title, text, items = []) {
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  const list = byId("confirm-list");
  const shown = items.slice(0, 12);
  list.replaceChildren(...shown.map((item) => h("li", { text: item })));
  if (items.length > shown.length)
    list.append(h("li", { class: "muted", text: `and ${items.length - shown.length} more` }));
  list.hidden = items.length === 0;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}

/** @param {number} n @param {string} one @param {string} many */
function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

async function askBalance() {
  const plan = page.snapshot?.plan;
  if (!plan || plan.moves.length === 0) return;
  // The plan shown now is the one confirmed: its time goes with the request, so a plan that
  // changed meanwhile is refused by the server rather than run unseen.
  const planAt = plan.at;
  const moves = plan.moves.map((m) => `${m.shard} ${m.from} -> ${m.to}`);
  const sentence =
    moves.length <= 3
      ? `Move ${plural(moves.length, "shard", "shards")}: ${moves.join(", ")}?`
      : `Move ${plural(moves.length, "shard", "shards")} (the plan made ${when(planAt)})?`;
  if (await confirmOnPage("Run this plan", sentence, moves.length <= 3 ? [] : moves)) {
    await post("balance", { planAt }, buttons.balance);
  }
}

async function askPause() {
  const run = page.snapshot?.run;
  const what = run?.kind === "drain" ? `the drain of ${run.database ?? "the database"}` : "the balance";
  const now = run?.current
    ? ` (${run.current.shard} ${run.current.from} -> ${run.current.to} finishes first)`
    : "";
  if (await confirmOnPage("Pause", `Pause ${what}: the move under way ends${now}, then it stops?`)) {
    await post("pause", {}, buttons.pause);
  }
}

async function askResume() {
  const run = page.snapshot?.run;
  const what = run?.kind === "drain" ? `the drain of ${run.database ?? "the database"}` : "the balance";
  const moves = run?.left ?? [];
  const left =
    moves.length > 0
      ? `: ${moves.map((m) => `${m.shard} ${m.from} -> ${m.to}`).join(", ")}`
      : run
        ? `: ${plural(Math.max(0, run.total - run.done), "move", "moves")} left of ${run.total}`
        : "";
  // The server makes exactly the moves this dialog named, or refuses.
  if (await confirmOnPage("Resume", `Resume ${what}${left}?`))
    await post("resume", { left: moves.map((m) => m.shard) }, buttons.resume);
}

/** @param {string} name @param {HTMLButtonElement} button */
async function askDrain(name, button) {
  const db = page.snapshot?.databases.find((d) => d.name === name);
  const shards = db?.shards ?? [];
  const text = `Drain ${name}: move its ${plural(shards.length, "shard", "shards")} to the other databases?`;
  if (await confirmOnPage("Drain", text, shards)) await post("drain", { database: name }, button);
}

/**
 * Posts an action and shows its answer in the message line.
 * @param {string} name @param {object} body @param {HTMLButtonElement} button
 */
async function post(name, body, button) {
  button.disabled = true;
  button.dataset.busy = "1";
  setMessage(`${name}: sent…`, "pending");
  try {
    const res = await fetch(`/api/actions/${encodeURIComponent(name)}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Shardkit-Action": name },
      body: JSON.stringify(body),
    });
    /** @type {{ ok?: boolean, message?: string } | null} */
    let answer = null;
    try {
      answer = await res.json();
    } catch {
      answer = null;
    }
    if (res.status === 401) {
      page.unauthorised = true;
      drawConnection();
      setMessage(NOT_AUTHORISED, "error");
    } else {
      const ok = res.ok && answer?.ok === true;
      const text =
        typeof answer?.message === "string" && answer.message
          ? answer.message
          : `${name}: HTTP ${res.status}`;
      setMessage(text, ok ? "ok" : "error");
    }
  } catch (error) {
    setMessage(
      `${name}: the dashboard did not answer (${error instanceof Error ? error.message : String(error)})`,
      "error",
    );
  } finally {
    delete button.dataset.busy;
    button.disabled = false;
    if (page.snapshot) drawRun(page.snapshot);
  }
}

/** @param {string} text @param {"ok" | "error" | "pending"} level */
function setMessage(text, level) {
  const line = byId("message");
  line.textContent = text;
  line.dataset.level = level;
  byId("message-time").textContent = clock.format(new Date());
}

// ---------------------------------------------------------------------------------------------
// Start

document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && !dialog.open && page.selected) select(null);
});
drawConnection();
connect();
setInterval(tick, 1000);
