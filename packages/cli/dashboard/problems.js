// The problems the snapshot names (a database down, a dead letter, a shard breaking its placement
// rule...), each with a button showing the shard or the database it is about; the tab's title
// counts the errors.
import { columns } from "./databases.js";
import { byId, h, whenChanged } from "./dom.js";
import { select } from "./shards.js";

/** @typedef {import("../src/dashboard/types.ts").DashboardSnapshot} Snapshot */

/** @param {Snapshot} snap */
export function drawProblems(snap) {
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
