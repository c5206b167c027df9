// The page of `shardkit dashboard`: plain browser modules, no build step. It receives a
// DashboardSnapshot (see ../src/dashboard/types.ts) on each update and redraws in place, each part
// from its own module: the map of databases and shards (databases.js, shards.js, charts.js), the
// problems, the moves and their history, the balancer's plan and run, the actions, the event stream.
// Every name, key and error in a snapshot is untrusted text: the page only ever sets it with
// textContent or attributes, never as HTML.
import { confirming } from "./actions.js";
import { drawMap } from "./databases.js";
import { byId } from "./dom.js";
import { when, windowText } from "./format.js";
import { drawHistory, drawMoves } from "./moves.js";
import { drawPlan } from "./plan.js";
import { drawProblems } from "./problems.js";
import { drawDetail, select } from "./shards.js";
import { page } from "./state.js";
import { connect, drawConnection } from "./stream.js";

/** @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot */

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

/** The configuration, the snapshot's time and what its load is. @param {Snapshot} snap */
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

document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && !confirming() && page.selected) select(null);
});
connect(render);
