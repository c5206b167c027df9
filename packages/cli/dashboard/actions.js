// The page's actions: each asks on the page first (a dialog naming what it will do), then posts to
// `/api/actions/:name` naming itself in a header, and shows the answer in the message line. The
// buttons are made once and kept, so a click under way keeps its state across updates.
import { byId, h } from "./dom.js";
import { clock, plural, when } from "./format.js";
import { NOT_AUTHORISED, page } from "./state.js";
import { drawConnection } from "./stream.js";

/** @typedef {import("../src/dashboard/types.ts").DashboardRun} Run */

const dialog = /** @type {HTMLDialogElement} */ (byId("confirm-dialog"));

/** @param {string} name @param {string} label @param {string} [cls] */
function actionButton(name, label, cls) {
  const b = /** @type {HTMLButtonElement} */ (
    h("button", { type: "button", "data-action": name, class: cls ?? null, text: label })
  );
  return b;
}

export const buttons = {
  plan: actionButton("plan", "Re-plan"),
  balance: actionButton("balance", "Run this plan…", "primary"),
  pause: actionButton("pause", "Pause…"),
  resume: actionButton("resume", "Resume…"),
};
buttons.plan.addEventListener("click", () => void post("plan", {}, buttons.plan));
buttons.balance.addEventListener("click", askBalance);
buttons.pause.addEventListener("click", askPause);
buttons.resume.addEventListener("click", askResume);

/**
 * Pause is for a run under way, resume for one that is not; neither while its post is.
 * @param {Run | null | undefined} run
 */
export function settleRunButtons(run) {
  if (!run) return;
  buttons.pause.disabled = run.state !== "running" || buttons.pause.dataset.busy === "1";
  buttons.resume.disabled = run.state === "running" || buttons.resume.dataset.busy === "1";
}

/** Whether the confirmation dialog is open (Esc closes it, not the selection). */
export function confirming() {
  return dialog.open;
}

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
export async function askDrain(name, button) {
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
    settleRunButtons(page.snapshot?.run);
  }
}

/** @param {string} text @param {"ok" | "error" | "pending"} level */
function setMessage(text, level) {
  const line = byId("message");
  line.textContent = text;
  line.dataset.level = level;
  byId("message-time").textContent = clock.format(new Date());
}
