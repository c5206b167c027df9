// The shards: each one's cell on the map (coloured by its heat, kept across updates so focus and
// hover stay), the selection (kept in the address as `#shard=...`, Esc clears it), and the panel
// with the selected shard's figures and heaviest keys.
import { byId, h, whenChanged } from "./dom.js";
import { count, heatColours, num, percent } from "./format.js";
import { page } from "./state.js";

/**
 * @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot
 * @typedef {import("../src/dashboard/types.ts").DashboardShard} Shard
 */

/** @type {Map<string, HTMLButtonElement>} by shard key */
const cells = new Map();

/** @param {Shard} shard */
export function drawCell(shard) {
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

/**
 * Forgets the cells of shards no longer shown.
 * @param {Set<string>} shown their keys
 */
export function keepCells(shown) {
  for (const key of cells.keys()) if (!shown.has(key)) cells.delete(key);
}

/** Where a shard lives, or where it was last seen when its owner does not answer. @param {Shard} shard */
function whereText(shard) {
  const last = page.lastSeenOn.get(shard.key);
  return shard.database ?? `unknown${last !== undefined ? ` (last seen on ${last})` : ""}`;
}

/** @param {Shard} shard */
function shardSummary(shard) {
  const unit = page.snapshot?.unit ?? "";
  const lines = [
    `${shard.key}: ${shard.state}${shard.epoch !== null ? `, epoch ${shard.epoch}` : ""}`,
    `on ${whereText(shard)}`,
    `load ${num(shard.load)} ${unit} (heat ${num(shard.heat)})`,
    `calls ${count(shard.calls)}, writes ${count(shard.writes)}, p99 ${shard.p99Ms === null ? "—" : `${num(shard.p99Ms)} ms`}`,
  ];
  if (shard.movingTo) lines.push(`moving to ${shard.movingTo}`);
  if (shard.violates) lines.push(`breaks: ${shard.violates}`);
  return lines.join("\n");
}

/** @param {string | null} key */
export function select(key) {
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

/** The selected shard's panel. @param {Snapshot} snap */
export function drawDetail(snap) {
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
    panel.replaceChildren(
      h("h2", null, `Shard ${shard.key}`, close),
      detailFigures(shard, snap.unit),
      h("h3", { text: "Heaviest keys (share of its calls)" }),
      topKeys(shard),
      h("p", { class: "muted small", text: "Keys are shown hashed unless the app records plain keys." }),
    );
  });
}

/** A shard's figures, as a list of terms. @param {Shard} shard @param {string} unit */
function detailFigures(shard, unit) {
  const rows = [
    ["database", whereText(shard)],
    ["state", shard.state],
    ["epoch", shard.epoch === null ? "—" : String(shard.epoch)],
    ["load", `${num(shard.load)} ${unit}`],
    ["heat", `${num(shard.heat)} of the hottest`],
    ["calls", count(shard.calls)],
    ["writes", count(shard.writes)],
    ["p99", shard.p99Ms === null ? "—" : `${num(shard.p99Ms)} ms`],
    ["moving to", shard.movingTo ?? "—"],
    ["breaks", shard.violates ?? "no placement rule"],
  ];
  return h(
    "dl",
    { class: "figures detail-figures" },
    ...rows.flatMap(([k, v]) => [
      h("dt", { text: k }),
      h("dd", { class: k === "breaks" && shard.violates ? "warn" : null, text: v }),
    ]),
  );
}

/** A shard's heaviest keys, each with a bar of its share of the shard's calls. @param {Shard} shard */
function topKeys(shard) {
  if (!shard.top.length) return h("p", { class: "muted", text: "No calls recorded in the window." });
  return h(
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
  );
}
