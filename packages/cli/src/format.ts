// Text for people: borderless, aligned columns (as `pg_lsclusters` or `kubectl get` print them),
// which stay greppable and cut-able, and a few number formats. Tables here are small (one row
// per shard or database) and plain ASCII, so a table library's borders, wrapping and Unicode
// width handling would add a dependency for nothing this output uses.

export interface Column {
  header: string;
  /** Numbers read best right-aligned. Default `left`. */
  align?: "left" | "right";
}

/** A column of numbers: right-aligned. */
export function alignRight(header: string): Column {
  return { header, align: "right" };
}

/** Columns separated by two spaces, each as wide as its widest cell; no trailing spaces. */
export function table(columns: readonly (Column | string)[], rows: readonly (readonly unknown[])[]): string {
  const cols = columns.map((c) => (typeof c === "string" ? { header: c } : c));
  const cells = rows.map((row) => cols.map((_, i) => cell(row[i])));
  const widths = cols.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (cols[i]!.align === "right" ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(cols.map((c) => c.header)), ...cells.map(line)].join("\n");
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return "-";
  return String(value);
}

/** `850 ms`, `1.2 s`, `3 min 05 s`. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "-";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

/** `19.8%` */
export function percent(share: number): string {
  return `${(share * 100).toFixed(1)}%`;
}

/** `512 B`, `12.0 KiB`, `3.4 MiB`. */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** `1,204` */
export function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** `1 database` / `3 databases`. */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/** An error in one line: its last non-empty line (Prisma puts where it was called first), with the code. */
export function oneLine(error: unknown): string {
  if (error === undefined || error === null) return "failed";
  const message = error instanceof Error ? error.message : String(error);
  const lines = message
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return plainDbError(lines.at(-1) ?? "failed").slice(0, 300);
}

/** Prisma's wrapper of a raw query's failure, `Raw query failed. Code: ... Message: `x``, down to `x`. */
export function plainDbError(text: string): string {
  return text.match(/^Raw query failed\. Code: `[^`]*`\. Message: `(.*)`$/)?.[1] ?? text;
}

/** A URL with its password hidden, as shardkit names databases (`postgresql://user:***@host/db`). */
export function redactUrl(url: string): string {
  // Up to the last "@" of the text: a password typed with "/" or "@" in it is hidden whole.
  return url.replace(/\/\/([^:/@]*):.*@/, "//$1:***@");
}
