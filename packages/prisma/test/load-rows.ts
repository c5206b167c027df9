// Load windows as the rows a router's flush sends (`FLUSH_LOAD`'s `$1`), for tests that write windows
// of their own making with the flush's statement.
import type { ShardLoadWindow } from "../src/load/read.js";
import type { LoadRow } from "../src/load/sql.js";

/** `windows` as flush rows, stamped by the database's clock as given (no `sent_at`). */
export function loadRows(windows: readonly ShardLoadWindow[]): string {
  const rows: LoadRow[] = windows.map((w) => ({
    shard: w.shard.bits,
    window_start: w.windowStart.toISOString(),
    window_ms: w.windowMs,
    router: w.router,
    calls: w.calls,
    writes: w.writes,
    rows_written: w.rowsWritten,
    db_ms: w.dbMs,
    sketch: w.sketch,
    top: w.top,
    config: w.config,
  }));
  return JSON.stringify(rows);
}
