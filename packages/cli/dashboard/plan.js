// The balancer: its last plan (why, the moves it makes, each database's load before and after,
// the shards too hot to move and those skipped), Re-plan and Run buttons, and the run under way
// (a balance or a drain: its progress, the move it is making, what is left when paused).
import { buttons, settleRunButtons } from "./actions.js";
import { byId, forget, h, place, s, setChildren, whenChanged } from "./dom.js";
import { arrow, bytes, num, when } from "./format.js";

/**
 * @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot
 * @typedef {import("../src/dashboard/types.ts").DashboardPlan} Plan
 */

/** @param {Snapshot} snap */
export function drawPlan(snap) {
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
    setChildren(
      body,
      h(
        "p",
        { class: "plan-reason" },
        h("strong", { text: plan.reason }),
        h("span", {
          class: "muted",
          text: ` (made ${when(plan.at)}${plan.stoppedBy ? `; stopped by ${plan.stoppedBy}` : ""})`,
        }),
      ),
      plan.stale ? h("p", { class: "plan-stale warn", text: `Stale: ${plan.stale}` }) : null,
      plan.problems.length
        ? h("ul", { class: "plan-problems" }, ...plan.problems.map((p) => h("li", { class: "bad", text: p })))
        : null,
      plan.moves.length
        ? planMoves(plan, snap.unit)
        : h("p", { class: "muted", text: "The plan moves nothing." }),
      plan.databases.length ? drawBalance(plan) : null,
      ...planLeftOut(plan, snap.unit),
    );
  });
}

/** The moves of a plan, as a table. @param {Plan} plan @param {string} unit */
function planMoves(plan, unit) {
  return h(
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
          h("th", { class: "num", text: `load (${unit})` }),
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
  );
}

/**
 * What the plan leaves where it is: the shards too hot to move, and those skipped (with why).
 * @param {Plan} plan @param {string} unit
 */
function planLeftOut(plan, unit) {
  /** @type {Node[]} */
  const parts = [];
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
            ` on ${x.database}: ${num(x.load)} ${unit}, ${x.reason}`,
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
  return parts;
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

/** The run under way, or the last one. @param {Snapshot} snap */
function drawRun(snap) {
  const run = snap.run;
  const area = byId("run-area");
  if (!run) {
    area.replaceChildren();
    forget("run");
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
  settleRunButtons(run);
}
