// The moves under way (each with its step and progress, a stopped one with what finishes it) and the
// history of the moves that ended (outcome, freeze, duration, rows).
import { byId, forget, h, place, whenChanged } from "./dom.js";
import { arrow, bytes, count, duration, when } from "./format.js";

/**
 * @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot
 * @typedef {import("../src/dashboard/types.ts").DashboardMove} Move
 */

/** @type {Map<string, HTMLTableSectionElement>} by shard */
const moveRows = new Map();

/** @param {Snapshot} snap */
export function drawMoves(snap) {
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
      forget(`move:${key}`);
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
export function drawHistory(snap) {
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
