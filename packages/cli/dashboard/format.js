// How the page writes figures, sizes, durations, times and heat: one place for each, so every part
// of the page writes them the same way.

/**
 * Whole numbers with thousands separators. One formatter made once: `toLocaleString("en")` makes
 * one per call, which at 1,024 shards (several figures each) was the page's largest cost in script.
 */
const whole = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

/** @param {number | null | undefined} n */
export function num(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "—";
  const a = Math.abs(n);
  if (a === 0) return "0";
  if (a >= 100) return whole.format(Math.round(n));
  if (a >= 10) return n.toFixed(1);
  if (a >= 0.01) return n.toFixed(2);
  return n.toPrecision(2);
}

/** @param {number | null | undefined} n */
export function count(n) {
  return n === null || n === undefined ? "—" : whole.format(Math.round(n));
}

/** @param {number | null | undefined} b */
export function bytes(b) {
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
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** @param {number} ms */
export function windowText(ms) {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000) return `${+(ms / 60_000).toFixed(1)} min`;
  return `${+(ms / 1000).toFixed(1)} s`;
}

export const clock = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});
export const shortClock = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  hour12: false,
});
const dateClock = new Intl.DateTimeFormat(undefined, {
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});

/** A time of day, with the date when it is not today. @param {string | null | undefined} iso */
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toDateString() === new Date().toDateString() ? clock.format(d) : dateClock.format(d);
}

/** @param {number} ms */
export function ago(ms) {
  if (ms < 1500) return "just now";
  return `${duration(Math.round(ms / 1000) * 1000)} ago`;
}

/** @param {number} share 0..1 */
export function percent(share) {
  if (!Number.isFinite(share)) return "—";
  const p = share * 100;
  return `${p > 0 && p < 1 ? p.toFixed(1) : Math.round(p)}%`;
}

/** @param {string} from @param {string} to */
export function arrow(from, to) {
  return `${from} → ${to}`;
}

/**
 * A perceptual ramp from pale (0, cool) to red (1, hot): lightness falls evenly in OKLCH.
 * @param {number} heat
 */
export function heatColours(heat) {
  const t = Math.min(1, Math.max(0, Number.isFinite(heat) ? heat : 0));
  const l = 0.97 - 0.42 * t;
  const c = 0.025 + 0.18 * t;
  const hue = 95 - 68 * t;
  return {
    bg: `oklch(${l.toFixed(3)} ${c.toFixed(3)} ${hue.toFixed(1)})`,
    ink: l < 0.7 ? "#fff" : "#1b1f24",
  };
}

/** @param {number} n @param {string} one @param {string} many */
export function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}
