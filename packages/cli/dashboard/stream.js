// The page's connection: the snapshot as server-sent events (`/api/events`), with `/api/state` as a
// fallback when the stream is refused or falls quiet, and the connection line that says which.
import { byId } from "./dom.js";
import { ago, when } from "./format.js";
import { NOT_AUTHORISED, page } from "./state.js";

/** @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot */

/** Without a snapshot for this long, the page asks `/api/state` instead. */
const FALLBACK_AFTER_MS = 15_000;

/** What draws a new snapshot (`connect`'s argument). @type {(snapshot: Snapshot) => void} */
let draw = () => {};

/**
 * Opens the event stream (and again, waiting longer each time, when it is refused outright); each
 * new snapshot becomes `page.snapshot` and is given to `render`. Every second the snapshot's age is
 * shown, and a page without one for 15 s asks `/api/state`.
 * @param {(snapshot: Snapshot) => void} render
 */
export function connect(render) {
  draw = render;
  drawConnection();
  open();
  setInterval(tick, 1000);
}

function open() {
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
      setTimeout(open, page.retryMs);
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

/** The connection line, and the notice a page without the token shows. */
export function drawConnection() {
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
  draw(snapshot);
}
