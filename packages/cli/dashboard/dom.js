// The page's small DOM helpers: elements made with their attributes and text (never HTML), children
// replaced or put in order without redrawing what stays, and a part drawn again only when what it
// shows changed.

const SVG = "http://www.w3.org/2000/svg";

/**
 * An element with attributes (null/false ones left out) and children (strings become text).
 * @param {string} tag
 * @param {Record<string, unknown> | null} [attrs]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
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
export function setChildren(parent, ...children) {
  parent.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
}

/**
 * An SVG element with attributes.
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
export function s(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) e.setAttribute(name, String(value));
  return e;
}

/** @param {string} id */
export function byId(id) {
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
export function place(parent, nodes) {
  nodes.forEach((node, i) => {
    const at = parent.children[i];
    if (at !== node) parent.insertBefore(node, at ?? null);
  });
  while (parent.children.length > nodes.length) parent.lastElementChild?.remove();
}

/**
 * What each part last drew, by name: `whenChanged` runs `draw` only when `value` differs from the
 * last one drawn under `name`; `forget(name)` makes the next call draw.
 * @type {Map<string, string>}
 */
const drawn = new Map();

/** @param {string} name @param {unknown} value @param {() => void} draw */
export function whenChanged(name, value, draw) {
  const signature = JSON.stringify(value);
  if (drawn.get(name) === signature) return;
  drawn.set(name, signature);
  draw();
}

/** @param {string} name */
export function forget(name) {
  drawn.delete(name);
}
