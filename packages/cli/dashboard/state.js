// What the page knows between updates: the last snapshot, the shard selected, the connection's
// state, and where each shard was last seen. Every name, key and error in a snapshot is untrusted
// text: the page only ever sets it with textContent or attributes, never as HTML.

/** @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot */

export const NOT_AUTHORISED = "not authorised: open the address the dashboard printed (with its token)";

export const page = {
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
